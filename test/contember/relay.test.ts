import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { createSqsClient } from '../../lib/deps.js'
import { createLogger } from '../../lib/log.js'
import { createRelayMetrics } from '../../lib/metrics/relay.js'
import { startRelay, type Relay } from '../../lib/relay/relay.js'
import { createSignals } from '../../lib/signals.js'
import { haveEngine, startEngine, type Engine, type EngineProject } from '../helpers/contember.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { useLocalStack } from '../helpers/stack.js'
import { until } from '../helpers/wait.js'

// The whole path against the real engine: content mutations through the engine's content API, its
// outbox, the relay, Actions' dispatch, a real receiver per target.

const db: TestDatabase = await freshDatabase()
const engineHere = haveEngine()
const handle = useLocalStack(db)

describe.skipIf(!engineHere)('the relay from a Contember engine into Actions', () => {
  let engine: Engine
  let project: EngineProject
  let a: Receiver
  let b: Receiver
  let relay: Relay | undefined
  const lines: string[] = []

  const startTheRelay = async () => {
    const { stack } = handle
    const sqs = createSqsClient(
      { AWS_REGION: 'us-east-1', SQS_CONNECT_TIMEOUT_MS: 1000, SQS_REQUEST_TIMEOUT_MS: 3000, SQS_MAX_ATTEMPTS: 2 },
      { endpoint: stack.sqsEndpoint ?? '', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } },
    )
    return startRelay(
      {
        actions: db.pool,
        log: createLogger('debug', line => lines.push(line)),
        metrics: createRelayMetrics(),
        signals: createSignals(sqs, stack.queueUrl),
      },
      [{ project: project.slug, url: project.dbUrl }],
      { batchSize: 50, pollIntervalMs: 500, listen: true, poolMax: 2, pool: { statementTimeoutMs: 10_000 } },
    )
  }

  beforeAll(async () => {
    ;[a, b] = [await startReceiver(), await startReceiver()]
    engine = await startEngine({ pgUrl: inject('pgAdminUrl') })
    project = await engine.createProject({ hook_a: { url: `${a.url}/a`, headers: { 'x-hook': 'a' } }, hook_b: { url: `${b.url}/b` } })
    relay = await startTheRelay()
  })
  afterAll(async () => {
    if (process.env.RELAY_DEBUG) console.log(lines.join('\n'))
    await relay?.stop()
    await engine?.stop()
    await Promise.all([a?.close(), b?.close()])
    await db.drop()
  })

  it('delivers the basic payload with its selection and the watch payload with the related change as an inner event', async () => {
    const created = await project.content<{ createArticle: { node: { id: string; author: { id: string } } } }>(
      `mutation { createArticle(data: { title: "Hello", author: { create: { name: "Ann" } } }) { ok node { id author { id } } } }`,
    )
    const { id, author } = created.createArticle.node
    await until('the create at both receivers', () => a.eventIds().length === 1 && b.eventIds().length === 1)
    await project.content(`mutation($id: UUID!) { updateAuthor(by: { id: $id }, data: { name: "Bob" }) { ok } }`, { id: author.id })
    await until('the watch event of the author change', () => b.eventIds().length === 2)
    const basic = a.requests[0]?.body.events[0]
    expect(basic).toMatchObject({
      meta: { trigger: 'article_basic', target: 'hook_a' },
      trigger: 'article_basic',
      operation: 'create',
      entity: 'Article',
      id,
      selection: { id, title: 'Hello', author: { id: author.id, name: 'Ann' } },
    })
    expect(a.requests[0]?.headers['x-hook']).toBe('a')
    const watch = b.requests[1]?.body.events[0]
    expect(watch).toMatchObject({
      trigger: 'article_watch',
      operation: 'watch',
      entity: 'Article',
      id,
      selection: { id, title: 'Hello' },
      events: [{ operation: 'update', entity: 'Author', id: author.id, path: ['author'], values: { name: 'Bob' }, old: { name: 'Ann' } }],
    })
    expect(await project.outbox()).toEqual([])
  })
})

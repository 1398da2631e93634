import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest'
import { createSqsClient } from '../../lib/deps.js'
import { createPool } from '../../lib/db/pool.js'
import { listRefused } from '../../lib/db/relay.js'
import { createLogger } from '../../lib/log.js'
import { createRelayMetrics, type RelayMetrics } from '../../lib/metrics/relay.js'
import { moveBatch } from '../../lib/relay/move.js'
import { scheduledRelayPass } from '../../lib/relay/once.js'
import { DEFAULT_RELAY_OPTIONS, startRelay, type Relay, type RelayOptions } from '../../lib/relay/relay.js'
import { createSignals } from '../../lib/signals.js'
import { runCli } from '../helpers/cli.js'
import { haveEngine, startEngine, type Engine, type EngineProject } from '../helpers/contember.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { useLocalStack } from '../helpers/stack.js'
import { until } from '../helpers/wait.js'

// The whole path against the real engine (@contember/engine-server 2.0.8, its own dispatcher off):
// content mutations through the engine's content API, its outbox, the relay, Actions' dispatch, a real
// receiver per target. Every delivery test here fails with the relay switched off: nothing else moves
// the engine's rows.

const db: TestDatabase = await freshDatabase()
const engineHere = haveEngine()
const handle = useLocalStack(db)

type Delivered = { meta: Record<string, unknown>; [key: string]: unknown }

describe.skipIf(!engineHere)('the relay from a Contember engine into Actions', () => {
  let engine: Engine
  let project: EngineProject
  let a: Receiver
  let b: Receiver
  let relay: Relay | undefined
  let metrics: RelayMetrics
  const lines: string[] = []

  const startTheRelay = async (options: Partial<RelayOptions> = {}) => {
    const { stack } = handle
    const sqs = createSqsClient(
      { AWS_REGION: 'us-east-1', SQS_CONNECT_TIMEOUT_MS: 1000, SQS_REQUEST_TIMEOUT_MS: 3000, SQS_MAX_ATTEMPTS: 2 },
      { endpoint: stack.sqsEndpoint ?? '', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } },
    )
    relay = await startRelay(
      { actions: db.pool, log: createLogger('debug', line => lines.push(line)), metrics, signals: createSignals(sqs, stack.queueUrl) },
      [{ project: project.slug, url: project.dbUrl }],
      { ...DEFAULT_RELAY_OPTIONS, batchSize: 50, pollIntervalMs: 500, pool: { statementTimeoutMs: 10_000 }, ...options },
    )
    return relay
  }
  const stopTheRelay = async () => {
    await relay?.stop()
    relay = undefined
  }
  const delivered = (r: Receiver): Delivered[] => r.requests.flatMap(req => (req.body?.events ?? []) as Delivered[])
  const createArticle = async (title: string) =>
    (
      await project.content<{ createArticle: { ok: boolean; node: { id: string; author: { id: string } } } }>(
        `mutation($title: String!) { createArticle(data: { title: $title, author: { create: { name: "Ann" } } }) { ok node { id author { id } } } }`,
        { title },
      )
    ).createArticle

  beforeAll(async () => {
    metrics = createRelayMetrics()
    ;[a, b] = [await startReceiver(), await startReceiver()]
    engine = await startEngine({ pgUrl: inject('pgAdminUrl') })
    project = await engine.createProject({ hook_a: { url: `${a.url}/a`, headers: { 'x-hook': 'a' } }, hook_b: { url: `${b.url}/b` } })
  })
  afterEach(async () => {
    await stopTheRelay()
  })
  afterAll(async () => {
    await stopTheRelay()
    await engine?.stop()
    await Promise.all([a?.close(), b?.close()])
    await db.drop()
  })

  it('delivers each row exactly as the engine built it: basic with its selection, watch with the related change as an inner event', async () => {
    // The relay is off: the rows wait in the outbox, as the engine wrote them.
    const { node } = await createArticle('Hello')
    await project.content(`mutation($id: UUID!) { updateAuthor(by: { id: $id }, data: { name: "Bob" }) { ok } }`, { id: node.author.id })
    const rows = await project.outbox()
    expect(rows).toHaveLength(3)
    expect(delivered(a).length + delivered(b).length).toBe(0)

    await startTheRelay()
    await until('every row at its receiver', () => delivered(a).length === 1 && delivered(b).length === 2)
    for (const row of rows) {
      const event = [...delivered(a), ...delivered(b)].find(e => e.meta.eventId === row.id)
      const { meta, ...payload } = event ?? { meta: {} }
      // The payload as the engine stored it, the ids and the creation time as the engine gave them.
      expect(payload).toEqual(row.payload)
      expect(meta).toMatchObject({
        transactionId: row.transaction_id,
        createdAt: row.created_at.toISOString(),
        // A first attempt's last state change is its creation, as the engine's own dispatcher sends it.
        lastStateChange: row.created_at.toISOString(),
        trigger: row.trigger,
        target: row.target,
      })
    }
    const basic = delivered(a)[0]
    expect(basic).toMatchObject({
      operation: 'create',
      entity: 'Article',
      id: node.id,
      selection: { id: node.id, title: 'Hello', author: { name: 'Ann' } },
    })
    expect(a.requests[0]?.headers['x-hook']).toBe('a')
    const watch = delivered(b).find(e => (e.events as Array<{ entity: string }>)[0]?.entity === 'Author')
    expect(watch).toMatchObject({
      operation: 'watch',
      entity: 'Article',
      id: node.id,
      selection: { id: node.id, title: 'Hello' },
      events: [
        { operation: 'update', entity: 'Author', id: node.author.id, path: ['author'], values: { name: 'Bob' }, old: { name: 'Ann' } },
      ],
    })
    // Moved means gone from the outbox, so the engine's own Actions API lists nothing as pending.
    expect(await project.outbox()).toEqual([])
    const pending = await project.actions<{ eventsToProcess: unknown[]; failedEvents: unknown[] }>(
      `{ eventsToProcess { id } failedEvents { id } }`,
    )
    expect(pending).toEqual({ eventsToProcess: [], failedEvents: [] })
  })

  it("delivers one entity's changes in the order their transactions wrote them", async () => {
    await startTheRelay()
    const { node } = await createArticle('v0')
    const titles = Array.from({ length: 8 }, (_, i) => `v${i + 1}`)
    for (const title of titles)
      await project.content(`mutation($id: UUID!, $t: String!) { updateArticle(by: { id: $id }, data: { title: $t }) { ok } }`, {
        id: node.id,
        t: title,
      })
    const ofArticle = () => delivered(a).filter(e => e.id === node.id)
    await until('every change of the article', () => ofArticle().length === titles.length + 1)
    expect(ofArticle().map(e => (e.selection as { title: string }).title)).toEqual(['v0', ...titles])
  })

  it('delivers nothing of a rolled-back mutation', async () => {
    await startTheRelay()
    const before = delivered(a).length
    const failed = await project.content<{ transaction: { ok: boolean } }>(
      `mutation { transaction { ok first: createArticle(data: { title: "rolled back" }) { ok } second: createArticle(data: { body: "no title" }) { ok } } }`,
    )
    expect(failed.transaction.ok).toBe(false)
    // A later mutation is the barrier: once it is delivered, anything of the rolled-back one would have been too.
    const { node } = await createArticle('after the rollback')
    await until('the barrier', () => delivered(a).some(e => e.id === node.id))
    expect(
      delivered(a)
        .slice(before)
        .map(e => (e.selection as { title: string }).title),
    ).toEqual(['after the rollback'])
  })

  it('writes nothing twice when it crashes between Actions committing and the outbox committing', async () => {
    const { node } = await createArticle('crash')
    const source = createPool(project.dbUrl, 2)
    try {
      const crash = new Error('crashed between the two commits')
      await expect(
        moveBatch({ source, actions: db.pool, afterActionsCommit: () => Promise.reject(crash) }, project.slug, [], 50),
      ).rejects.toBe(crash)
    } finally {
      await source.end()
    }
    // Actions has the rows, and so does the outbox (its transaction never committed).
    const ids = (await project.outbox()).map(r => r.id)
    expect(ids).toHaveLength(2)
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM actions_event WHERE id = ANY($1::uuid[])`, [ids])
    expect(rows[0]?.n).toBe(2)

    await startTheRelay()
    await until('the outbox empty', async () => (await project.outbox()).length === 0)
    await until(
      'both rows delivered',
      () => [...delivered(a), ...delivered(b)].filter(e => e.id === node.id && ids.includes(String(e.meta.eventId))).length === 2,
    )
    // Give a second copy, if there were one, time to arrive; then count.
    await new Promise(r => setTimeout(r, 500))
    const copies = [...delivered(a), ...delivered(b)].filter(e => ids.includes(String(e.meta.eventId)))
    expect(copies.map(e => e.meta.eventId).sort()).toEqual([...ids].sort())
  })

  it('leaves a row over the payload bound in the outbox with its reason, and moves the rows of its transaction around it', async () => {
    await startTheRelay()
    const big = 'x'.repeat(300 * 1024)
    const both = await project.content<{ transaction: { ok: boolean; small: { node: { id: string } }; huge: { node: { id: string } } } }>(
      `mutation($big: String!) { transaction { ok small: createArticle(data: { title: "small" }) { node { id } } huge: createArticle(data: { title: $big }) { node { id } } } }`,
      { big },
    )
    expect(both.transaction.ok).toBe(true)
    const small = both.transaction.small.node.id
    const huge = both.transaction.huge.node.id
    await until(
      'the small article delivered to both targets',
      () => delivered(a).some(e => e.id === small) && delivered(b).some(e => e.id === small),
    )
    await until('the refusal recorded', async () => (await listRefused(db.pool, project.slug, 10)).length === 2)
    const left = await project.outbox()
    expect(left.map(r => [r.trigger, (r.payload as { id: string }).id, r.state]).sort()).toEqual([
      ['article_basic', huge, 'created'],
      ['article_watch', huge, 'created'],
    ])
    const refused = await listRefused(db.pool, project.slug, 10)
    expect(refused.map(r => r.eventId).sort()).toEqual(left.map(r => r.id).sort())
    for (const r of refused) expect(r.reason).toMatch(/^payload of (about )?\d+ bytes( serialized)?, expected at most 262144$/)
    const warned = lines.map(l => JSON.parse(l) as Record<string, unknown>).filter(l => l.msg === "Relay left a row in the engine's outbox")
    expect(warned.map(l => l.eventId)).toEqual(expect.arrayContaining(left.map(r => r.id)))
    expect(await metrics.registry.getSingleMetricAsString('contember_actions_relay_refused_rows')).toContain(
      `contember_project="${project.slug}"} 2`,
    )
    expect(delivered(a).some(e => e.id === huge)).toBe(false)
    // The operator's view: `actions relay refused` lists both rows with their reason.
    const listed = await runCli({ DATABASE_URL: db.url }, ['relay', 'refused', '--project', project.slug])
    expect(listed.code).toBe(0)
    for (const r of left)
      expect(listed.out).toMatch(new RegExp(`^${r.id}  ${project.slug}  ${r.target}  ${r.trigger}  since \\S+  payload of `, 'm'))
    // Later rows still flow past the two left behind.
    const { node } = await createArticle('after the refusal')
    await until('the later article', () => delivered(a).some(e => e.id === node.id))
    expect((await project.outbox()).length).toBe(2)
  })

  it('moves the outbox in one bounded scheduled pass, as the relay function runs it', async () => {
    const { node } = await createArticle('scheduled')
    const config = {
      RELAY_SOURCES: `${project.slug}=${project.dbUrl}`,
      RELAY_BATCH_SIZE: 10,
      DB_STATEMENT_TIMEOUT_MS: 10_000,
      DB_PREPARED_STATEMENTS: true,
    }
    const passed = await scheduledRelayPass({ config, actions: db.pool, log: createLogger('error', () => {}), metrics }, () => 60_000)
    expect(passed).toEqual([{ project: project.slug, moved: 2, refused: 2 }])
    // The two rows refused earlier stay; nothing else is left.
    expect((await project.outbox()).some(r => (r.payload as { id: string }).id === node.id)).toBe(false)
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM actions_event WHERE payload->>'id' = $1`, [node.id])
    expect(rows[0]?.n).toBe(2)
  })

  it("imports the variables from the engine's Actions API once, values unprinted", async () => {
    const secret = 'tok-' + 'z'.repeat(20)
    await project.actions(`mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }`, {
      v: [
        { name: 'API_TOKEN', value: secret },
        { name: 'REGION', value: 'eu' },
      ],
    })
    const run = await runCli({ DATABASE_URL: db.url, CONTEMBER_TOKEN: engine.rootToken }, [
      'relay',
      'import-variables',
      project.slug,
      '--engine',
      engine.url,
    ])
    expect(run).toMatchObject({ code: 0, err: '' })
    expect(run.out).toBe(`imported 2 variable(s) of ${project.slug} from the engine (mode merge); values are not printed`)
    const { rows } = await db.pool.query<{ name: string; value: string }>(
      `SELECT name, value FROM actions_variable WHERE project = $1 ORDER BY name`,
      [project.slug],
    )
    expect(rows).toEqual([
      { name: 'API_TOKEN', value: secret },
      { name: 'REGION', value: 'eu' },
    ])
    const refused = await runCli({ DATABASE_URL: db.url, CONTEMBER_TOKEN: 'f'.repeat(40) }, [
      'relay',
      'import-variables',
      project.slug,
      '--engine',
      engine.url,
    ])
    expect(refused.code).toBe(1)
    expect(refused.err).not.toContain(secret)
  })

  it('wakes on the engine notification, long before its poll interval', async () => {
    await startTheRelay({ pollIntervalMs: 120_000 })
    // The first look after LISTEN has happened once the listener is up; a new row can only come by notification now.
    await new Promise(r => setTimeout(r, 1000))
    const { node } = await createArticle('notified')
    await until('the notified article', () => delivered(a).some(e => e.id === node.id), 20_000)
  })

  it('polls when it does not listen, so a lost notification costs at most the poll interval', async () => {
    await startTheRelay({ listen: false, pollIntervalMs: 1000 })
    const { node } = await createArticle('polled')
    await until('the polled article', () => delivered(a).some(e => e.id === node.id), 20_000)
  })

  it('refuses to start on an outbox whose columns it does not know, naming them', async () => {
    const other = await engine.createProject({ hook_a: { url: `${a.url}/a` }, hook_b: { url: `${b.url}/b` } })
    const c = createPool(other.dbUrl, 1)
    try {
      await c.query(`ALTER TABLE system.actions_event ADD COLUMN shard integer, DROP COLUMN log`)
    } finally {
      await c.end()
    }
    const started = startRelay(
      { actions: db.pool, log: createLogger('error', () => {}), metrics },
      [{ project: other.slug, url: other.dbUrl }],
      DEFAULT_RELAY_OPTIONS,
    )
    await expect(started).rejects.toThrow(
      /not the one @contember\/engine-server 2\.0\.8 writes[\s\S]*column log \(jsonb\) is missing[\s\S]*column shard is not known/,
    )
  })
})

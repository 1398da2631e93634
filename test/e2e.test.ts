import { spawn } from 'node:child_process'
import { SendMessageCommand } from '@aws-sdk/client-sqs'
import { describe, expect, it } from 'vitest'
import { insertEvents } from './helpers/events.js'
import { createPool } from '../lib/db/pool.js'
import { freshDatabase } from './helpers/db.js'
import { useDatabase, useReceiver } from './helpers/harness.js'
import { startLocalStack, type LocalStack } from '../local/stack.js'
import { useLocalStack } from './helpers/stack.js'
import { until } from './helpers/wait.js'
import { startQueue } from './helpers/sqs.js'
import { createPayload, TX } from './fixtures/schemas.js'

// The whole pipeline through the local stack: HTTP → enqueue → SQS → dispatch → receiver, and the sweeper.
const db = useDatabase()
const rx = useReceiver()
const local = useLocalStack(db, { env: { LOG_LEVEL: 'error', DISPATCH_MAX_CONCURRENCY: '4' } })

async function http(method: string, path: string, body?: unknown, base = local.stack.url): Promise<any> {
  const res = await fetch(base + path, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const json = await res.json()
  if (!res.ok) throw new Error(`${res.status} ${JSON.stringify(json)}`)
  return json
}
const putSchema = (project: string, target: Record<string, unknown>, base = local.stack.url) =>
  http(
    'PUT',
    `/schema/${project}`,
    {
      targets: { t: { type: 'webhook', name: 't', url: rx.url + '/' + project, ...target } },
      triggers: { go: { type: 'basic', name: 'go', target: 't', entity: 'Article', create: true, delete: false, update: false } },
    },
    base,
  )
const enqueue = (project: string, n: number, offset = 0) =>
  http('POST', '/enqueue', {
    project,
    transactionId: TX,
    events: Array.from({ length: n }, (_, i) => ({ trigger: 'go', payload: createPayload(offset + i) })),
  })
const idsFor = (project: string) =>
  rx.requests.filter(r => r.path === '/' + project).flatMap(r => r.body.events.map((e: { meta: { eventId: string } }) => e.meta.eventId))

describe('end to end through the local stack', () => {
  it('delivers enqueued events through SQS and dispatch to the receiver', async () => {
    await putSchema('e1', { batchSize: 10 })
    const { eventIds } = await enqueue('e1', 25)
    await until('25 deliveries', () => idsFor('e1').length >= 25)
    expect([...idsFor('e1')].sort()).toEqual([...eventIds].sort())
    // Outcomes are recorded just after the receiver answers.
    await until('25 recorded successes', async () => (await http('GET', '/events/e1')).succeed === 25)
    expect(await http('GET', '/events/e1')).toEqual({ succeed: 25 })
  })

  it('retries a failing receiver on time through a delayed signal, without the sweeper', async () => {
    const arrivals: number[] = []
    rx.respond((req, res) => {
      if (req.path !== '/e2') {
        res.end()
        return
      }
      arrivals.push(Date.now())
      res.statusCode = arrivals.length === 1 ? 500 : 200
      res.end()
    })
    await putSchema('e2', { initialRepeatIntervalMs: 2000 })
    await enqueue('e2', 1)
    await until('the retry', () => arrivals.length >= 2)
    const gap = (arrivals[1] ?? 0) - (arrivals[0] ?? 0)
    // Due 2 s later; the signal's delay is whole seconds and the poller adds up to a second.
    expect(gap).toBeGreaterThanOrEqual(1900)
    expect(gap).toBeLessThan(4500)
    await until('success recorded', async () => (await http('GET', '/events/e2')).succeed === 1)
    rx.respond((_, res) => {
      res.end()
    })
  })

  it('recovers events whose signal was lost, through the sweeper', async () => {
    await putSchema('e3', {})
    // Written without a signal, as if SendMessage had failed after the commit.
    const pool = createPool(db.url, 1)
    const ids = ['8d7e7a57-5a4e-4d43-9d43-0cf1b0f5a001', '8d7e7a57-5a4e-4d43-9d43-0cf1b0f5a002']
    try {
      await insertEvents(
        pool,
        { project: 'e3', transactionId: TX, stage: null, schemaVersion: 1, identityId: null, ipAddress: null, userAgent: null },
        ids.map(id => ({ id, trigger: 'go', target: 't', priority: 0, payload: createPayload() })),
      )
    } finally {
      await pool.end()
    }
    await new Promise(r => setTimeout(r, 1500))
    expect(idsFor('e3')).toEqual([])
    await local.stack.sweep()
    await until('the sweeper to re-drive them', () => idsFor('e3').length === 2)
    expect([...idsFor('e3')].sort()).toEqual(ids)
  })

  it('delivers 10,000 events through the pipeline, each exactly once', async () => {
    await putSchema('e4', { batchSize: 50 })
    const sent: string[] = []
    for (let i = 0; i < 100; i += 10) {
      const res = await Promise.all(Array.from({ length: 10 }, (_, j) => enqueue('e4', 100, (i + j) * 100)))
      for (const r of res) sent.push(...r.eventIds)
    }
    await until('10,000 deliveries', () => idsFor('e4').length >= 10_000, 90_000)
    await until('10,000 recorded successes', async () => (await http('GET', '/events/e4')).succeed === 10_000)
    const got = idsFor('e4')
    expect(got).toHaveLength(10_000)
    expect(new Set(got).size).toBe(10_000)
    expect([...got].sort()).toEqual([...sent].sort())
    expect(await http('GET', '/events/e4')).toEqual({ succeed: 10_000 })
  }, 120_000)
})

describe('a dispatch invocation that crashes', () => {
  it('leaves its SQS message for redelivery and its events for the next lease', async () => {
    const queue = await startQueue('crash-signals')
    const crashDb = await freshDatabase()
    let hold = true
    rx.respond((req, res) => {
      if (req.path !== '/crash' || !hold) res.end()
    })
    const env = {
      ...process.env,
      DATABASE_URL: crashDb.url,
      SIGNAL_QUEUE_URL: queue.queueUrl,
      AWS_ENDPOINT_URL_SQS: queue.endpoint,
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_REGION: 'us-east-1',
      LEASE_MARGIN_MS: '1000',
      LOG_LEVEL: 'error',
      LOCAL_DISPATCH_TIMEOUT_MS: '3000',
      DISPATCH_TIME_MARGIN_MS: '0',
    }
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/stack-child.ts'], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise(resolve => child.on('exit', resolve))
    let second: LocalStack | undefined
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', d => {
          if (String(d).includes('ready')) resolve()
        })
        child.on('exit', () => reject(new Error('the child stack exited early')))
      })
      const childPool = createPool(crashDb.url, 1)
      await childPool.query(`INSERT INTO actions_schema (project, version, schema) VALUES ('crash', 1, $1)`, [
        JSON.stringify({
          targets: { t: { type: 'webhook', name: 't', url: rx.url + '/crash', timeoutMs: 1000 } },
          triggers: { go: { type: 'basic', name: 'go', target: 't', entity: 'Article', create: true, delete: false, update: false } },
        }),
      ])
      await childPool.end()
      // The child is the only dispatcher until it dies; the event and its signal are written here.
      const pool = createPool(crashDb.url, 1)
      await insertEvents(
        pool,
        { project: 'crash', transactionId: TX, stage: null, schemaVersion: 1, identityId: null, ipAddress: null, userAgent: null },
        [{ id: '8d7e7a57-5a4e-4d43-9d43-0cf1b0f5a0ff', trigger: 'go', target: 't', priority: 0, payload: createPayload() }],
      )
      await pool.end()
      await queue.client.send(new SendMessageCommand({ QueueUrl: queue.queueUrl, MessageBody: JSON.stringify({ project: 'crash' }) }))
      await until('the child to start delivering', () => idsFor('crash').length === 1)
      child.kill('SIGKILL')
      await exited
      // The signal being handled was neither deleted nor settled: it waits out its visibility timeout.
      // (The child's first sweeper pass may have added one more signal for the same project.)
      const inspected = queue.server.inspectQueue('crash-signals')
      expect(inspected?.messages.inflight.length).toBeGreaterThanOrEqual(1)
      hold = false
      second = await startLocalStack({ env, port: 0, sweepIntervalMs: 3_600_000, dispatchTimeoutMs: 3000 })
      await until('redelivery after the visibility timeout and the lease', () => idsFor('crash').length === 2, 30_000)
      await until('the signal to be deleted', () => {
        const m = queue.server.inspectQueue('crash-signals')?.messages
        return (m?.inflight.length ?? 1) === 0 && (m?.ready.length ?? 1) === 0
      })
      expect(await http('GET', '/events/crash', undefined, second.url)).toEqual({ succeed: 1 })
    } finally {
      child.kill('SIGKILL')
      await second?.stop()
      await queue.stop()
      await crashDb.drop()
      rx.respond((_, res) => {
        res.end()
      })
    }
  }, 60_000)
})

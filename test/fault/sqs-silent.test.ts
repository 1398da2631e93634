import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps, createSqsClient, type Deps } from '../../lib/deps.js'
import { freshDatabase } from '../helpers/db.js'
import { schemaFor } from '../helpers/events.js'
import { startSilentServer } from '../helpers/net.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { parseSamples } from '../helpers/prom.js'
import { pushgatewayBinary, requireBinary, scrape, startPushgateway, type RunningPushgateway } from '../helpers/pushgateway.js'
import { useDatabase, useReceiver } from '../helpers/harness.js'
import { json } from '../helpers/receiver.js'
import { logCapture } from '../helpers/runtime.js'
import { createPayload, TX } from '../fixtures/schemas.js'

const hasPushgateway = requireBinary('prometheus-pushgateway', pushgatewayBinary())

// Small bounds so the test is quick; the production defaults are larger (lib/config.ts).
const REQUEST_TIMEOUT_MS = 400
const MAX_ATTEMPTS = 2
/** What one SQS send may cost against a silent endpoint: every attempt times out, plus the SDK's short backoff. */
const SEND_BOUND_MS = MAX_ATTEMPTS * REQUEST_TIMEOUT_MS + 1_000
/** Slack for the work around the send (database, Pushgateway) on a busy 2-core machine. */
const SLACK_MS = 5_000

/** Fails the test instead of hanging it when `p` does not settle within `ms`. */
async function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([p, deadline])
  } finally {
    clearTimeout(timer)
  }
}

describe.skipIf(!hasPushgateway)('an SQS endpoint that accepts connections and never answers', () => {
  let silent: Awaited<ReturnType<typeof startSilentServer>>
  let pgw: RunningPushgateway
  const rx = useReceiver()
  const db = useDatabase()
  let deps: Deps
  const { log, captureLogs } = logCapture()

  beforeAll(async () => {
    silent = await startSilentServer()
    pgw = await startPushgateway()
    const config = loadConfig({
      DATABASE_URL: db.url,
      SIGNAL_QUEUE_URL: `${silent.url}/000000000000/signals`,
      PUSHGATEWAY_URL: pgw.url,
      METRICS_INSTANCE: 'fault-env',
      SQS_CONNECT_TIMEOUT_MS: '200',
      SQS_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      SQS_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    })
    // The client exactly as a cold start builds it, pointed at the silent endpoint.
    const sqs = createSqsClient(config, { endpoint: silent.url, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
    deps = createDeps(config, { sqs, log })
  })
  afterAll(async () => {
    await closeDeps(deps)
    await pgw.stop()
    await silent.close()
  })

  it('lets enqueue answer within its bound with its rows written and the failure logged', async () => {
    await schemaFor(deps, 'enq', { t: { url: rx.url } })
    const before = silent.accepted()
    const logs = captureLogs()
    let res: { eventIds: string[] }
    try {
      res = await within(
        'enqueue',
        SEND_BOUND_MS + SLACK_MS,
        createEnqueue(() => deps)(
          { project: 'enq', transactionId: TX, events: [1, 2, 3].map(i => ({ trigger: 'to_t', payload: createPayload(i) })) },
          createContext(30_000),
        ),
      )
    } finally {
      logs.restore()
    }
    expect(res.eventIds).toHaveLength(3)
    const { rows } = await deps.db.query(`SELECT id, state FROM actions_event WHERE project = 'enq' ORDER BY id`)
    expect(rows.map(r => r.id).sort()).toEqual([...res.eventIds].sort())
    expect(rows.every(r => r.state === 'created')).toBe(true)
    // It really went to the silent endpoint, once per attempt, and gave up.
    expect(silent.accepted() - before).toBe(MAX_ATTEMPTS)
    const errors = logs.records().filter(r => r.level === 'error')
    expect(errors.map(e => e.msg)).toEqual(['Could not signal the dispatch queue; the sweeper will pick the events up'])
    expect(logs.lines.join('\n')).not.toContain(silent.url)
  })

  it('lets a sweep finish, log the failed re-drive and push its heartbeat to the Pushgateway', async () => {
    await schemaFor(deps, 'swept', { t: { url: rx.url } })
    await deps.db.query(`INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
      VALUES (gen_random_uuid(), 'swept', gen_random_uuid(), 1, 't', 'to_t', '{}'::jsonb)`)
    const logs = captureLogs()
    try {
      const res = await within('the sweep', SEND_BOUND_MS + SLACK_MS, createSweeper(() => deps)({}, createContext(55_000)))
      // Nothing was signalled: the send timed out.
      expect(res.signals).toEqual({})
    } finally {
      logs.restore()
    }
    expect(
      logs
        .records()
        .filter(r => r.level === 'error')
        .map(r => r.msg),
    ).toEqual(['Could not send re-drive signals; the next pass tries again'])
    const s = parseSamples(await within('the scrape', 5_000, scrape(pgw.url)))
    const hb = s.find(
      x =>
        x.name === 'contember_actions_worker_heartbeat_timestamp_seconds' &&
        x.labels.job === 'contember_actions_sweeper' &&
        x.labels.contember_project === 'swept',
    )
    expect(hb?.value).toBeGreaterThan(0)
    expect(
      s.find(x => x.name === 'contember_actions_due_events' && x.labels.contember_project === 'swept' && x.labels.state === 'created')
        ?.value,
    ).toBe(1)
  })

  it('lets a drain finish: outcomes recorded, the failed continuation signal logged, the retry left in the database', async () => {
    await schemaFor(deps, 'drained', { t: { url: rx.url, initialRepeatIntervalMs: 5_000 } })
    const { rows: inserted } = await deps.db.query<{
      id: string
    }>(`INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
      SELECT gen_random_uuid(), 'drained', gen_random_uuid(), 1, 't', 'to_t', '{}'::jsonb FROM generate_series(1, 3) RETURNING id`)
    const failing = inserted[0]?.id ?? ''
    // The receiver reports one event failed: it is retried in 5 s, which needs a delayed signal.
    rx.respond((req, res) => {
      const ids = ((req.body?.events ?? []) as Array<{ meta: { eventId: string } }>).map(e => e.meta.eventId)
      json(res, 200, { failures: ids.includes(failing) ? [{ eventId: failing, error: 'not yet' }] : [] })
    })
    const logs = captureLogs()
    try {
      const res = await within(
        'the dispatch invocation',
        SEND_BOUND_MS + SLACK_MS,
        createDispatch(() => deps)(signalEvent('drained'), createContext(60_000)),
      )
      expect(res).toEqual({ batchItemFailures: [] })
    } finally {
      logs.restore()
    }
    expect(
      logs
        .records()
        .filter(r => r.level === 'error')
        .map(r => r.msg),
    ).toEqual(['Could not leave a signal for the rest of the work; the sweeper will pick it up'])
    const { rows } = await deps.db.query<{ id: string; state: string; num_retries: number; log: unknown[] }>(
      `SELECT id, state, num_retries, log FROM actions_event WHERE project = 'drained'`,
    )
    const byId = new Map(rows.map(r => [r.id, r]))
    expect(byId.get(failing)).toMatchObject({ state: 'retrying', num_retries: 1 })
    expect(byId.get(failing)?.log).toHaveLength(1)
    expect(rows.filter(r => r.id !== failing).map(r => [r.state, r.log])).toEqual([
      ['succeed', []],
      ['succeed', []],
    ])
    // The invocation's counters still reached the Pushgateway.
    const s = parseSamples(await within('the scrape', 5_000, scrape(pgw.url)))
    expect(
      s.find(
        x =>
          x.name === 'contember_actions_events_succeeded_total' &&
          x.labels.instance === 'fault-env' &&
          x.labels.contember_project === 'drained',
      )?.value,
    ).toBe(2)
  })
})

describe('a Pushgateway that accepts connections and never answers', () => {
  it('costs a sweep no more than its push timeouts', async () => {
    const silent = await startSilentServer()
    const db = await freshDatabase()
    const queueless = await startSilentServer()
    const config = loadConfig({
      DATABASE_URL: db.url,
      SIGNAL_QUEUE_URL: `${queueless.url}/000000000000/signals`,
      PUSHGATEWAY_URL: silent.url,
      PUSHGATEWAY_TIMEOUT_MS: '300',
      SQS_REQUEST_TIMEOUT_MS: '300',
      SQS_MAX_ATTEMPTS: '1',
    })
    const { log, captureLogs } = logCapture()
    const deps = createDeps(config, {
      log,
      sqs: createSqsClient(config, { endpoint: queueless.url, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    })
    const logs = captureLogs()
    try {
      await schemaFor(deps, 'p', { t: { url: 'http://127.0.0.1:9' } })
      // Push, stale-group listing and the counters push after the invocation: each waits at most 300 ms.
      const res = await within('the sweep', 3 * 300 + SLACK_MS, createSweeper(() => deps)({}, createContext(55_000)))
      expect(res.projects).toBe(1)
      expect(silent.accepted()).toBeGreaterThanOrEqual(2)
      const warned = logs
        .records()
        .filter(r => r.level === 'warn')
        .map(r => r.msg)
      expect(warned).toContain('Could not push sweeper gauges to the Pushgateway')
      expect(warned).toContain('Could not clean up stale metric groups')
    } finally {
      logs.restore()
      await closeDeps(deps)
      await db.drop()
      await silent.close()
      await queueless.close()
    }
  })
})

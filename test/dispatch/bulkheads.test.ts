import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { TX } from '../fixtures/schemas.js'

// Bulkheads: a drain gives up its place when its slice ends, even while its requests hang, so no
// project of an invocation waits for another project's receiver; those requests finish and are
// recorded before the invocation returns, each event attempted once.

/** Runs one dispatch invocation over signals for `projects`, in that order. */
function invoke(env: TestEnv, projects: readonly string[]) {
  const handler = createHandler(() => env.deps)
  return handler(sqsEvent(...projects.map(project => JSON.stringify({ project }))), createContext(600_000))
}

/** Per project (the request path), when its receiver saw its first request. */
function firstRequests(rx: Receiver, hang: ReadonlySet<string>): Map<string, number> {
  const firstAt = new Map<string, number>()
  rx.respond((req, res) => {
    const p = req.path.slice(1)
    if (!firstAt.has(p)) firstAt.set(p, Date.now())
    // A hanging receiver never answers: the request ends at the target's timeout.
    if (!hang.has(p)) res.end()
  })
  return firstAt
}

describe.each([
  { timeoutMs: 2_000, pool: '3' },
  { timeoutMs: 2_000, pool: '10' },
  { timeoutMs: 30_000, pool: '3' },
  { timeoutMs: 30_000, pool: '10' },
])('bulkheads at timeoutMs $timeoutMs with DB_POOL_MAX $pool', ({ timeoutMs, pool }) => {
  let env: TestEnv
  let rx: Receiver
  beforeAll(async () => {
    env = await testEnv({ DB_POOL_MAX: pool, DISPATCH_TIME_MARGIN_MS: '1000' })
    rx = await startReceiver()
  })
  afterAll(async () => {
    await rx?.close()
    await env?.close()
  })

  it('starts a healthy project within a second behind three whose receivers hang, in one signal batch', async () => {
    const hanging = ['hang1', 'hang2', 'hang3']
    const ids = new Map<string, string[]>()
    for (const p of [...hanging, 'healthy']) {
      await schemaFor(env.deps, p, { t: { url: `${rx.url}/${p}`, timeoutMs } })
      ids.set(p, await enqueueMany(env.deps, p, 'to_t', 5))
    }
    await env.queue.drain()
    const firstAt = firstRequests(rx, new Set(hanging))
    const started = Date.now()
    const res = await invoke(env, [...hanging, 'healthy'])
    const ended = Date.now()

    expect(res).toEqual({ batchItemFailures: [] })
    expect((firstAt.get('healthy') ?? Infinity) - started).toBeLessThan(1_000)
    // The invocation returned only after the hanging requests ended at their timeout, and recorded them.
    expect(ended - started).toBeGreaterThanOrEqual(timeoutMs)
    const { rows } = await env.deps.db.query<{ project: string; state: string; num_retries: number }>(
      `SELECT project, state, num_retries FROM actions_event WHERE project = ANY($1) ORDER BY project`,
      [[...hanging, 'healthy']],
    )
    expect(rows).toHaveLength(20)
    for (const row of rows)
      expect(row, row.project).toMatchObject({ state: row.project === 'healthy' ? 'succeed' : 'retrying', num_retries: 1 })
    // Each event went out once: no request of a hanging project was repeated by a continuation.
    const sent = rx.eventIds()
    expect(new Set(sent).size).toBe(sent.length)
    expect(sent.length).toBe(20)
  }, 120_000)
})

describe('bulkheads across invocations', () => {
  let env: TestEnv
  let rx: Receiver
  beforeAll(async () => {
    env = await testEnv({ DB_POOL_MAX: '3', DISPATCH_PROJECT_SLICE_MS: '300', DISPATCH_TIME_MARGIN_MS: '1000' })
    rx = await startReceiver()
  })
  afterAll(async () => {
    await rx?.close()
    await env?.close()
  })

  it("leaves the continuation while a hanging target's requests are in flight, so another invocation serves the rest at once", async () => {
    const timeoutMs = 5_000
    await schemaFor(env.deps, 'mixed', { hang: { url: `${rx.url}/hang`, timeoutMs }, ok: { url: `${rx.url}/ok` } })
    const hung = await enqueueMany(env.deps, 'mixed', 'to_hang', 3)
    // More healthy work than one 300 ms slice delivers.
    await env.deps.db.query(
      `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, visible_at)
       SELECT gen_random_uuid(), 'mixed', $1, 1, 'ok', 'to_ok', jsonb_build_object('n', i), now() - interval '1 minute'
       FROM generate_series(1, 50000) AS i`,
      [TX],
    )
    await env.queue.drain()
    firstRequests(rx, new Set(['hang']))
    const started = Date.now()
    const first = invoke(env, ['mixed'])
    // The slice ends with the three requests hanging: the drain yields and signals the project at once.
    let signals: unknown[] = []
    for (let i = 0; i < 40 && signals.length === 0; i++) {
      await new Promise(r => setTimeout(r, 100))
      signals = await env.queue.drain()
    }
    expect(signals).toContainEqual({ project: 'mixed' })
    expect(Date.now() - started).toBeLessThan(timeoutMs)
    // A second invocation, on that signal, delivers more of the healthy backlog while the first still waits.
    const okBefore = rx.requests.filter(r => r.path === '/ok').length
    await invoke(env, ['mixed'])
    expect(Date.now() - started).toBeLessThan(timeoutMs)
    expect(rx.requests.filter(r => r.path === '/ok').length).toBeGreaterThan(okBefore)

    await first
    const { rows } = await env.deps.db.query<{ state: string; num_retries: number }>(
      `SELECT state, num_retries FROM actions_event WHERE project = 'mixed' AND target = 'hang'`,
    )
    // The hanging target's events were sent once each (the second invocation found them leased) and their timeouts recorded.
    expect(rows.map(r => [r.state, r.num_retries])).toEqual(hung.map(() => ['retrying', 1]))
    expect(rx.requests.filter(r => r.path === '/hang').flatMap(r => r.body.events)).toHaveLength(3)
    const okSent = rx.requests
      .filter(r => r.path === '/ok')
      .flatMap(r => r.body.events.map((e: { meta: { eventId: string } }) => e.meta.eventId))
    expect(new Set(okSent).size).toBe(okSent.length)
  }, 60_000)
})

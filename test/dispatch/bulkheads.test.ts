import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { eventIdsOf, startReceiver, type Receiver } from '../helpers/receiver.js'
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
      // A retry an hour out: the one attempt each event may have in this test is the one asserted.
      await schemaFor(env.deps, p, { t: { url: `${rx.url}/${p}`, timeoutMs, initialRepeatIntervalMs: 3_600_000 } })
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

  it("serves more signals while a hanging target's requests are in flight, so the invocation's place in the queue is not idle", async () => {
    const timeoutMs = 5_000
    // The hanging target's retry is an hour out, so a drain still running after its timeout (a slow
    // box) finds nothing of it due: a second attempt would be a retry, not a repeat by a continuation.
    await schemaFor(env.deps, 'mixed', {
      hang: { url: `${rx.url}/hang`, timeoutMs, initialRepeatIntervalMs: 3_600_000 },
      ok: { url: `${rx.url}/ok` },
    })
    await schemaFor(env.deps, 'other', { ok: { url: `${rx.url}/other` } })
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
    // Another tenant's signal arrives while the invocation waits on the hanging requests.
    await new Promise(r => setTimeout(r, 1_000))
    const other = await enqueueMany(env.deps, 'other', 'to_ok', 5)
    await first
    const hangEnded = started + timeoutMs
    const at = (path: string) => rx.requests.filter(r => r.path === path).map(r => r.at)

    // The invocation took the continuation of its own project and the other tenant's signal, and
    // delivered both before the hanging requests timed out.
    expect(at('/ok').filter(t => t > started + 1_500 && t < hangEnded - 500).length).toBeGreaterThan(0)
    const otherAt = at('/other')
    expect(otherAt.length).toBeGreaterThan(0)
    expect(Math.max(...otherAt)).toBeLessThan(hangEnded)
    const delivered = new Set(rx.requests.filter(r => r.path === '/other').flatMap(eventIdsOf))
    expect(other.filter(id => !delivered.has(id))).toEqual([])

    const { rows } = await env.deps.db.query<{ state: string; num_retries: number }>(
      `SELECT state, num_retries FROM actions_event WHERE project = 'mixed' AND target = 'hang'`,
    )
    // The hanging target's events were sent once each (later drains found them leased) and their timeouts recorded.
    expect(rows.map(r => [r.state, r.num_retries])).toEqual(hung.map(() => ['retrying', 1]))
    expect(rx.requests.filter(r => r.path === '/hang').flatMap(eventIdsOf)).toHaveLength(3)
    const okSent = rx.requests.filter(r => r.path === '/ok').flatMap(eventIdsOf)
    expect(new Set(okSent).size).toBe(okSent.length)
  }, 60_000)
})

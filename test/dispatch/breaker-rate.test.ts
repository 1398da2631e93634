import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { DEFAULT_RECORD_SETTINGS, type RecordSettings } from '../../lib/db/health.js'
import { recordAttempts } from '../../lib/db/record.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, targetHealth } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { TX } from '../fixtures/schemas.js'

// The breaker tells a flaky receiver from a dead one: failed batches in a row pause a target only when
// most of its batches in the window failed too. With the defaults (5 in a row, 90 % of the window).

const env = useHarness({
  // One request at a time, one event each: the receiver's pattern maps onto batches exactly.
  config: { DISPATCH_CONCURRENCY: '1', LEASE_MARGIN_MS: '1000' },
  receiver: true,
  project: 'rate',
})
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

/** Drains until every event of the project succeeded (or `rounds` drains ran), checking after each that the target never paused. */
async function drainWatchingPauses(project: string, rounds: number): Promise<{ pausedOnce: boolean; left: number }> {
  let pausedOnce = false
  for (let i = 0; i < rounds; i++) {
    await drainProject(env.deps, project, FOREVER)
    if ((await targetHealth(env.deps.db, project, 't'))?.paused_at) pausedOnce = true
    const { rows } = await env.deps.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND state <> 'succeed'`,
      [project],
    )
    if ((rows[0]?.n ?? 0) === 0) return { pausedOnce, left: 0 }
    await sleep(5)
  }
  const { rows } = await env.deps.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND state <> 'succeed'`,
    [project],
  )
  return { pausedOnce, left: rows[0]?.n ?? 0 }
}

describe('a breaker that tells flaky from dead', () => {
  it('never pauses a target that answers three requests in four, though five of its failures come in a row', async () => {
    // Of every 20 requests the 1st and the last 4 fail (503): 75 % answered, and each block's last four
    // failures run on into the next block's first, five failed batches in a row. A failure answers
    // after 30 ms, past the recorder's linger, so each is a record statement of its own.
    let n = 0
    env.rx.respond((_, res) => {
      const i = n++ % 20
      if (i === 0 || i >= 16) {
        setTimeout(() => {
          res.statusCode = 503
          res.end()
        }, 30)
      } else res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 50, initialRepeatIntervalMs: 1 } })
    await enqueueMany(env.deps, env.project, 'to_t', 90)
    const logs = env.captureLogs()

    const { pausedOnce, left } = await drainWatchingPauses(env.project, 200)

    expect(n).toBeGreaterThanOrEqual(100)
    expect(pausedOnce).toBe(false)
    expect(left).toBe(0)
    expect(logs.records().filter(r => String(r.msg ?? '').startsWith('Webhook target paused'))).toEqual([])
    logs.restore()
  }, 60_000)

  it('pauses a target that refuses everything within its first drain, before each of its events had an attempt', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 503
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 50, initialRepeatIntervalMs: 1 } })
    await enqueueMany(env.deps, env.project, 'to_t', 40)
    await drainProject(env.deps, env.project, FOREVER)
    expect(await targetHealth(env.deps.db, env.project, 't')).toMatchObject({ paused_reason: 'failures' })
    // Five failed batches pause it; the few more are those sent while the fifth's outcome was being written.
    expect(env.rx.requests.length).toBeGreaterThanOrEqual(5)
    expect(env.rx.requests.length).toBeLessThan(40)
    const { rows } = await env.deps.db.query<{ state: string; n: number }>(
      `SELECT state, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY state`,
      [env.project],
    )
    expect(rows.filter(r => r.state === 'failed')).toEqual([])
  }, 60_000)

  it('resumes a paused target at once when its probe is answered', async () => {
    let down = true
    env.rx.respond((_, res) => {
      res.statusCode = down ? 503 : 200
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 50, initialRepeatIntervalMs: 1 } })
    await enqueueMany(env.deps, env.project, 'to_t', 10)
    for (let i = 0; i < 50 && !(await targetHealth(env.deps.db, env.project, 't'))?.paused_at; i++) {
      await drainProject(env.deps, env.project, FOREVER)
      await sleep(5)
    }
    expect((await targetHealth(env.deps.db, env.project, 't'))?.paused_reason).toBe('failures')
    down = false
    // The probe is due BREAKER_PROBE_MS (30 s) on: bring it forward, as waiting would.
    await env.deps.db.query(`UPDATE actions_target_health SET probe_at = now() WHERE project = $1`, [env.project])
    await drainProject(env.deps, env.project, FOREVER)
    expect(await targetHealth(env.deps.db, env.project, 't')).toMatchObject({ paused_at: null, paused_reason: null })
    // Resumed at once: the same drain went on to deliver the backlog after the probe.
    const { rows } = await env.deps.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND state = 'succeed'`,
      [env.project],
    )
    expect(rows[0]?.n).toBe(10)
  }, 60_000)
})

describe('the failure rate at its edges', () => {
  // Two in a row and half the window, so each edge is a few statements; one statement per batch.
  const settings: RecordSettings = { ...DEFAULT_RECORD_SETTINGS, breakerFailures: 2, breakerRate: 0.5, breakerWindowMs: 60_000 }

  /** Records one batch of one event of target t: a success, or a 503. */
  async function batch(project: string, ok: boolean, s: RecordSettings = settings): Promise<void> {
    const { rows } = await env.deps.db.query<{ id: string; lease: Date }>(
      `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, lease_until)
       VALUES (gen_random_uuid(), $1, $2, 1, 't', 'to_t', '{}', 'processing', date_trunc('milliseconds', now() + interval '1 minute'))
       RETURNING id, lease_until AS lease`,
      [project, TX],
    )
    const row = rows[0]
    if (!row) throw new Error('no event')
    await recordAttempts(
      env.deps.db,
      [
        {
          id: row.id,
          lease: row.lease.toISOString(),
          project,
          target: 't',
          attempts: 0,
          outcome: ok ? { ok: true, code: 200 } : { ok: false, code: 503, errorMessage: 'Service Unavailable' },
          durationMs: 1,
          maxAttempts: 10,
          initialRepeatIntervalMs: 1_000,
        },
      ],
      s,
    )
  }
  const paused = async (project: string) => (await targetHealth(env.deps.db, project, 't'))?.paused_reason ?? null

  it('pauses two failures in a row when most of the window failed: one failure, one success, then the two (3 of 4)', async () => {
    const p = env.project
    for (const ok of [false, true, false]) await batch(p, ok)
    expect(await paused(p)).toBeNull()
    await batch(p, false)
    expect(await paused(p)).toBe('failures')
  })

  it('pauses at exactly the rate (3 failed of 6) and not just under it (3 of 7)', async () => {
    const p = env.project
    for (const ok of [false, true, true, true, false]) await batch(p, ok)
    await batch(p, false)
    expect(await paused(p)).toBe('failures')
    const q = `${p}b`
    for (const ok of [false, true, true, true, true, false]) await batch(q, ok)
    await batch(q, false)
    expect(await paused(q)).toBeNull()
  })

  it('forgets successes twice the window ago, so a target that went dead since pauses after its run alone', async () => {
    const short = { ...settings, breakerWindowMs: 200 }
    const p = env.project
    for (const ok of [false, true, true, true, true, true]) await batch(p, ok, short)
    await sleep(450)
    await batch(p, false, short)
    await batch(p, false, short)
    expect(await paused(p)).toBe('failures')
    // Within the window the same successes keep the run of two under the rate (3 of 8).
    const q = `${p}b`
    for (const ok of [false, true, true, true, true, true, false, false]) await batch(q, ok)
    expect(await paused(q)).toBeNull()
  })

  it('a rate of 1 pauses only a target whose whole window failed', async () => {
    const all = { ...settings, breakerRate: 1 }
    const p = env.project
    for (const ok of [false, true, false, false, false, false]) await batch(p, ok, all)
    expect(await paused(p)).toBeNull()
    const q = `${p}b`
    for (const ok of [false, false]) await batch(q, ok, all)
    expect(await paused(q)).toBe('failures')
  })

  it('takes BREAKER_FAILURE_RATE above 0 up to 1 and BREAKER_WINDOW_MS as a positive integer, refusing others', () => {
    const base = { DATABASE_URL: 'postgres://x@127.0.0.1/x', SIGNAL_QUEUE_URL: 'http://127.0.0.1/q', AWS_REGION: 'us-east-1' }
    expect(loadConfig({ ...base, BREAKER_FAILURE_RATE: '1' }).BREAKER_FAILURE_RATE).toBe(1)
    expect(loadConfig({ ...base, BREAKER_FAILURE_RATE: '0.01' }).BREAKER_FAILURE_RATE).toBe(0.01)
    expect(loadConfig(base)).toMatchObject({ BREAKER_FAILURE_RATE: 0.9, BREAKER_WINDOW_MS: 60_000 })
    expect(() => loadConfig({ ...base, BREAKER_FAILURE_RATE: '0' })).toThrow(/BREAKER_FAILURE_RATE/)
    expect(() => loadConfig({ ...base, BREAKER_FAILURE_RATE: '1.01' })).toThrow(/BREAKER_FAILURE_RATE/)
    expect(() => loadConfig({ ...base, BREAKER_WINDOW_MS: '0' })).toThrow(/BREAKER_WINDOW_MS/)
  })
})

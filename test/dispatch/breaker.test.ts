import { describe, expect, it } from 'vitest'
import { msUntilNextDue } from '../../lib/db/due.js'
import { targetHealth } from '../helpers/events.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { eventIdsOf, json, outage, startReceiver } from '../helpers/receiver.js'
import { testEnv } from '../helpers/runtime.js'

// Small numbers so the outage fits in seconds: pause after 2 failed batches, probe every 300 ms doubling to 600 ms.
const PROBE_MS = 300
const env = useHarness({
  config: {
    LEASE_MARGIN_MS: '1000',
    DISPATCH_CONCURRENCY: '1',
    BREAKER_FAILURES: '2',
    BREAKER_PROBE_MS: String(PROBE_MS),
    BREAKER_PROBE_MAX_MS: String(2 * PROBE_MS),
  },
  receiver: true,
  project: 'h',
})
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

describe('the circuit breaker', () => {
  it('pauses a target that answers 503, lets only probes through, and delivers every event once after it recovers, none failed', async () => {
    const target = outage()
    env.rx.respond(target.respond)
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 3, initialRepeatIntervalMs: 1, batchSize: 2 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 8)
    const logs = env.captureLogs()

    // Outage: drain until the breaker pauses the target.
    for (let i = 0; i < 50 && !(await targetHealth(env.deps.db, env.project, 't'))?.paused_at; i++) {
      await drainProject(env.deps, env.project, FOREVER)
      await sleep(5)
    }
    const paused = await targetHealth(env.deps.db, env.project, 't')
    expect(paused).toMatchObject({ paused_reason: 'failures' })
    expect(paused?.probe_at).not.toBeNull()
    const pause = logs.records().find(r => (r.msg === undefined ? false : String(r.msg).startsWith('Webhook target paused')))
    expect(pause).toMatchObject({ project: env.project, target: 't', reason: 'failures' })
    expect(logs.lines.join('\n')).not.toContain(env.rx.url)

    // Paused, still down: drains keep running, only single probe batches reach the receiver.
    const before = await states(env.deps, env.project)
    const phaseStart = env.rx.requests.length
    const until = Date.now() + 5 * PROBE_MS
    while (Date.now() < until) {
      await drainProject(env.deps, env.project, FOREVER)
      await sleep(20)
    }
    const probes = env.rx.requests.slice(phaseStart)
    expect(probes.length).toBeGreaterThan(0)
    // At most one probe per probe interval (the first is due 300 ms after the pause, then every 600 ms).
    expect(probes.length).toBeLessThanOrEqual(Math.ceil((5 * PROBE_MS) / PROBE_MS))
    for (let i = 1; i < probes.length; i++) expect((probes[i]?.at ?? 0) - (probes[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(PROBE_MS - 50)
    const probed = new Set(probes.flatMap(eventIdsOf))
    const during = await states(env.deps, env.project)
    for (const [id, row] of during) {
      expect(row.state).not.toBe('failed')
      // Events outside the probes were not attempted while paused.
      if (!probed.has(id)) expect(row.num_retries).toBe(before.get(id)?.num_retries)
    }

    // Recovery: no operator; the next probe succeeds, the target resumes and its backlog drains.
    target.recover()
    for (let i = 0; i < 100 && [...(await states(env.deps, env.project)).values()].some(s => s.state !== 'succeed'); i++) {
      await drainProject(env.deps, env.project, FOREVER)
      await sleep(20)
    }
    const after = await states(env.deps, env.project)
    expect([...after.values()].map(s => s.state)).toEqual(ids.map(() => 'succeed'))
    expect([...target.delivered.keys()].sort()).toEqual([...ids].sort())
    expect([...target.delivered.values()].every(count => count === 1)).toBe(true)
    expect(await targetHealth(env.deps.db, env.project, 't')).toMatchObject({
      paused_at: null,
      paused_reason: null,
      consecutive_failures: 0,
      failing_since: null,
    })
    expect(
      logs
        .records()
        .some(
          r =>
            r.msg === 'Webhook target resumed: a delivery succeeded, its events drain again' &&
            r.target === 't' &&
            r.project === env.project,
        ),
    ).toBe(true)
    logs.restore()
  })

  it('still fails, after maxAttempts, an event that a working target keeps rejecting', async () => {
    let bad = ''
    env.rx.respond((req, res) => {
      const rejected = eventIdsOf(req).filter(id => id === bad)
      if (rejected.length) json(res, 200, { failures: rejected.map(eventId => ({ eventId, error: 'rejected' })) })
      else res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 3, initialRepeatIntervalMs: 1, batchSize: 2 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 4)
    bad = ids[0] ?? ''
    for (let i = 0; i < 50 && (await states(env.deps, env.project)).get(bad)?.state !== 'failed'; i++) {
      await drainProject(env.deps, env.project, FOREVER)
      await sleep(5)
    }
    const rows = await states(env.deps, env.project)
    expect(rows.get(bad)).toMatchObject({ state: 'failed', num_retries: 3 })
    expect(rows.get(bad)?.log).toHaveLength(3)
    for (const id of ids.slice(1)) expect(rows.get(id)?.state).toBe('succeed')
    expect((await targetHealth(env.deps.db, env.project, 't'))?.paused_at ?? null).toBeNull()
  })

  it('pauses a target that answers 410 Gone at once, with no probe, and keeps its events', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 410
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 1, batchSize: 2 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 4)
    await drainProject(env.deps, env.project, FOREVER)
    // The first answer pauses it; at most the batch the one worker took meanwhile went out too.
    const sent = env.rx.requests.length
    expect(sent).toBeLessThanOrEqual(2)
    expect(await targetHealth(env.deps.db, env.project, 't')).toMatchObject({ paused_reason: 'gone', probe_at: null })
    await sleep(3 * PROBE_MS)
    await drainProject(env.deps, env.project, FOREVER)
    expect(env.rx.requests).toHaveLength(sent)
    const rows = await states(env.deps, env.project)
    expect(ids.map(id => rows.get(id)?.state)).toEqual(ids.map(() => expect.stringMatching(/^(created|retrying)$/)))
    // The attempt is visible in the log, though it was the last one allowed.
    expect(rows.get(ids[0] ?? '')?.log).toHaveLength(1)
    // Nothing for a signal to wake: the target waits for an operator.
    expect(await msUntilNextDue(env.deps.db, env.project)).toBeUndefined()
  })
})

describe('the first probe after a pause on a cold drain', () => {
  it('comes BREAKER_PROBE_MS after the pause, not twice that: failures of batches already in flight are no failed probes', async () => {
    const wide = await testEnv({
      LEASE_MARGIN_MS: '1000',
      DISPATCH_CONCURRENCY: '8',
      BREAKER_FAILURES: '2',
      BREAKER_PROBE_MS: '1000',
      BREAKER_PROBE_MAX_MS: '8000',
    })
    const down = await startReceiver((_, res) => {
      setTimeout(() => {
        res.statusCode = 503
        res.end()
      }, 30)
    })
    try {
      await schemaFor(wide.deps, 'cold', { t: { url: down.url, maxAttempts: 10, initialRepeatIntervalMs: 1 } })
      await enqueueMany(wide.deps, 'cold', 'to_t', 16)
      // Eight requests at once: the pause comes with six more failures still on their way.
      await drainProject(wide.deps, 'cold', FOREVER)
      const h = await targetHealth(wide.deps.db, 'cold', 't')
      expect(h).toMatchObject({ paused_reason: 'failures', probe_interval_ms: 1000 })
      const gap = (h?.probe_at?.getTime() ?? 0) - (h?.paused_at?.getTime() ?? 0)
      expect(gap).toBeGreaterThanOrEqual(1000)
      expect(gap).toBeLessThan(1500)
      expect(down.requests.length).toBeGreaterThan(2)
      // The probe itself failing doubles the interval, once.
      const before = down.requests.length
      for (let i = 0; i < 40 && down.requests.length === before; i++) {
        await drainProject(wide.deps, 'cold', FOREVER)
        await sleep(50)
      }
      expect(down.requests.length).toBe(before + 1)
      expect(down.requests.at(-1)!.at - (h?.paused_at?.getTime() ?? 0)).toBeLessThan(2000)
      expect(await targetHealth(wide.deps.db, 'cold', 't')).toMatchObject({ paused_reason: 'failures', probe_interval_ms: 2000 })
    } finally {
      await down.close()
      await wide.close()
    }
  }, 30_000)
})

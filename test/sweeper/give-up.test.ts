// A bound on waiting: events of a target paused longer than PAUSED_GIVE_UP_HOURS
// (scaled down here) fail terminally with the pause in their log, counted; the target stays paused,
// and a bulk retry after the target recovers delivers each once.
import { describe, expect, it } from 'vitest'
import { retryEvents } from '../../lib/db/operator.js'
import { resumeTarget } from '../../lib/db/pauses.js'
import { targetHealth } from '../helpers/events.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { sweep } from '../../lib/sweeper/sweep.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { outage } from '../helpers/receiver.js'

// One second.
const HOURS = 1 / 3600
const env = useHarness({
  config: { DISPATCH_CONCURRENCY: '1', BREAKER_FAILURES: '2', BREAKER_PROBE_MS: '60000', PAUSED_GIVE_UP_HOURS: String(HOURS) },
  receiver: true,
})

describe('PAUSED_GIVE_UP_HOURS', () => {
  it('fails the events of a target paused longer, naming the pause, counts them, and a bulk retry after recovery delivers each once', async () => {
    const target = outage()
    env.rx.respond(target.respond)
    await schemaFor(env.deps, 'outage', { t: { url: env.rx.url, maxAttempts: 10, initialRepeatIntervalMs: 1 } })
    const ids = await enqueueMany(env.deps, 'outage', 'to_t', 5)
    for (let i = 0; i < 10 && !(await targetHealth(env.deps.db, 'outage', 't'))?.paused_at; i++)
      await drainProject(env.deps, 'outage', FOREVER)
    expect(await targetHealth(env.deps.db, 'outage', 't')).toMatchObject({ paused_reason: 'failures' })

    // Not yet: the pause is younger than the bound.
    expect((await sweep(env.deps, { remainingMs: () => 60_000 })).gaveUp).toEqual({})
    await new Promise(r => setTimeout(r, 1_200))
    const before =
      (await env.deps.metrics.registry.getSingleMetric('contember_actions_events_failed_total')?.get())?.values.find(
        v => v.labels.contember_project === 'outage',
      )?.value ?? 0
    const res = await sweep(env.deps, { remainingMs: () => 60_000 })
    expect(res.gaveUp).toEqual({ outage: 5 })
    const after =
      (await env.deps.metrics.registry.getSingleMetric('contember_actions_events_failed_total')?.get())?.values.find(
        v => v.labels.contember_project === 'outage',
      )?.value ?? 0
    expect(after - before).toBe(5)
    for (const row of (await states(env.deps, 'outage')).values()) {
      expect(row.state).toBe('failed')
      expect(JSON.stringify(row.log.at(-1))).toMatch(
        /Gave up: the target has been paused since \d{4}-\d\d-\d\dT[\d:]+Z \(down\), longer than PAUSED_GIVE_UP_HOURS/,
      )
    }
    // The target stays paused.
    expect(await targetHealth(env.deps.db, 'outage', 't')).toMatchObject({ paused_reason: 'failures' })

    // Recovery: the target answers again and is resumed; a bulk retry delivers every event once.
    target.recover()
    await resumeTarget(env.deps.db, 'outage', 't')
    expect(
      await retryEvents(env.deps.db, {
        project: 'outage',
        target: undefined,
        state: 'failed',
        since: undefined,
        until: undefined,
        limit: 100,
      }),
    ).toEqual({ matched: 5, changed: 5 })
    await drainProject(env.deps, 'outage', FOREVER)
    expect([...target.delivered.keys()].sort()).toEqual([...ids].sort())
    expect([...target.delivered.values()].every(v => v === 1)).toBe(true)
  })
})

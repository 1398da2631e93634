// The console's recent figures in the admin API: each target's success rate over the events
// resolved in the last hour, the project's failures of the last 24 h, and the bulk call's dry-run count.
// Events are written through the real insert, then moved to the states and times a case needs, in a
// real Postgres; every answer is checked against the OpenAPI document.
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { restRoutes } from '../../lib/admin/rest.js'
import type { Principal, Route } from '../../lib/admin/types.js'
import { RECENT_MAX_EVENTS, RECENT_WINDOW_SECONDS, TARGET_OUTCOMES } from '../../lib/db/admin-recent.js'
import { PROJECT_STATS } from '../../lib/db/admin-events.js'
import { insertEvents, schemaFor } from '../helpers/events.js'
import { TX } from '../fixtures/schemas.js'
import { useHarness } from '../helpers/harness.js'
import { expectDocumented, routeOf } from '../helpers/openapi.js'

const env = useHarness({ project: 'recent' })
const system: Principal = { kind: 'system' }

async function call(method: Route['method'], path: string, body?: unknown) {
  const route = routeOf(restRoutes, method, path)
  const result = await route.handle({
    deps: env.deps,
    principal: system,
    params: { project: env.project },
    query: new URLSearchParams(),
    body,
  })
  expectDocumented(route, result)
  return result
}

/** Writes `n` events of `target`, then gives them `state` with the change (and, when terminal, the resolution) `ago` in the past. */
async function events(target: string, n: number, state: string, ago: string, created = ago): Promise<string[]> {
  const ctx = { project: env.project, transactionId: TX, stage: null, schemaVersion: 1, identityId: null, ipAddress: null, userAgent: null }
  const rows = Array.from({ length: n }, (_, i) => ({ id: randomUUID(), trigger: `to_${target}`, target, priority: 0, payload: { id: i } }))
  const ids = await insertEvents(env.deps.db, ctx, rows)
  await env.deps.db.query(
    `UPDATE actions_event SET state = $2::actions_event_state, num_retries = 1,
       last_state_change = now() - $3::interval, created_at = now() - $4::interval,
       resolved_at = CASE WHEN $2 IN ('succeed', 'failed', 'stopped') THEN now() - $3::interval END,
       failed_at = CASE WHEN $2 = 'failed' THEN now() - $3::interval END,
       visible_at = CASE WHEN $2 = 'retrying' THEN now() + interval '1 hour' ELSE visible_at END
     WHERE id = ANY($1::uuid[])`,
    [ids, state, ago, created],
  )
  return ids
}

type Targets = { targets: Array<{ target: string; recent: unknown }>; recentWindow: unknown }

describe('GET …/targets: the recent success rate', () => {
  it('walks the resolved index over the window, under a LIMIT (never a scan of the table)', async () => {
    await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9/a' } })
    // A table whose history is mostly older than the window, as retention's days make it.
    await events('a', 20_000, 'succeed', '3 hours')
    await env.deps.db.query('ANALYZE actions_event')
    const { rows } = await env.deps.db.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${TARGET_OUTCOMES.text}`,
      TARGET_OUTCOMES.values({ project: env.project, window_s: RECENT_WINDOW_SECONDS, max_events: RECENT_MAX_EVENTS }),
    )
    const plan = rows.map(r => r['QUERY PLAN']).join('\n')
    expect(plan).toContain('actions_event_resolved_idx')
    expect(plan).toContain('Limit')
    expect(plan).not.toContain('Seq Scan')
  }, 60_000)

  it('is succeeded / (succeeded + failed) of the events resolved in the last hour, and null for a target without any', async () => {
    await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9/a' }, b: { url: 'http://127.0.0.1:9/b' } })
    await events('a', 3, 'succeed', '10 minutes')
    await events('a', 1, 'failed', '59 minutes')
    // Outside the window, never delivered nor refused, or not resolved: none of them counts.
    await events('a', 5, 'failed', '61 minutes')
    await events('a', 2, 'stopped', '1 minute')
    await events('a', 2, 'retrying', '1 minute')
    await events('b', 4, 'succeed', '2 hours')
    const res = await call('GET', '/v1/projects/:project/targets')
    const body = res.body as Targets
    expect(body.targets.map(t => [t.target, t.recent])).toEqual([
      ['a', { succeeded: 3, failed: 1, successRate: 0.75 }],
      ['b', { succeeded: 0, failed: 0, successRate: null }],
    ])
    expect(body.recentWindow).toEqual({ seconds: RECENT_WINDOW_SECONDS, maxEvents: RECENT_MAX_EVENTS, limitReached: false })
  })

  it(`counts only the project's newest ${RECENT_MAX_EVENTS} resolved events, and says the limit cut the window`, async () => {
    await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9/a' }, b: { url: 'http://127.0.0.1:9/b' } })
    // The failures are older than the LIMIT's newest RECENT_MAX_EVENTS successes, so none of them is counted.
    await events('b', 10, 'failed', '50 minutes')
    await events('a', RECENT_MAX_EVENTS, 'succeed', '5 minutes')
    const body = (await call('GET', '/v1/projects/:project/targets')).body as Targets
    expect(body.targets.map(t => [t.target, t.recent])).toEqual([
      ['a', { succeeded: RECENT_MAX_EVENTS, failed: 0, successRate: 1 }],
      ['b', { succeeded: 0, failed: 0, successRate: null }],
    ])
    expect(body.recentWindow).toMatchObject({ limitReached: true })
  }, 60_000)
})

describe('GET …/stats: failed in the last 24 h', () => {
  it('counts the events that failed for good under 24 h ago, not older failures nor retrying ones', async () => {
    await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9/a' } })
    await events('a', 2, 'failed', '23 hours')
    await events('a', 3, 'failed', '25 hours')
    await events('a', 1, 'retrying', '1 minute')
    const res = await call('GET', '/v1/projects/:project/stats')
    expect(res.body).toMatchObject({ failedLast24h: 2, failedLast24hCapped: false, counts: { failed: 5, retrying: 1 } })
  })

  it('reads the failed index for it', async () => {
    const { rows } = await env.deps.db.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${PROJECT_STATS.text}`,
      PROJECT_STATS.values({ project: env.project, failed_window_s: 86_400, failed_cap: 10_000, counted_resolved: 20_000 }),
    )
    expect(rows.map(r => r['QUERY PLAN']).join('\n')).toContain('actions_event_failed_idx')
  })
})

describe('POST …/events/retry with dryRun', () => {
  it('counts what the same call then retries, changing nothing, with the same created_at bounds and limit', async () => {
    await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9/a' }, b: { url: 'http://127.0.0.1:9/b' } })
    // Changed recently but created two days ago: the bulk filter bounds created_at, not the change time.
    await events('a', 4, 'failed', '1 hour', '2 days')
    await events('a', 3, 'failed', '1 hour', '1 hour')
    await events('b', 2, 'failed', '1 hour', '1 hour')
    const since = new Date(Date.now() - 86_400_000).toISOString()
    const body = { target: 'a', since }
    const dry = await call('POST', '/v1/projects/:project/events/retry', { ...body, dryRun: true })
    expect(dry.body).toEqual({
      action: 'retry',
      dryRun: true,
      matched: 3,
      changed: 0,
      skipped: 0,
      limit: 100_000,
      limitReached: false,
      signalled: false,
    })
    const { rows } = await env.deps.db.query('SELECT 1 FROM actions_event WHERE project = $1 AND state = $2', [env.project, 'failed'])
    expect(rows).toHaveLength(9)
    expect(await env.queue.drain()).toEqual([])
    const limited = await call('POST', '/v1/projects/:project/events/stop', { dryRun: true, limit: 2 })
    expect(limited.body).toMatchObject({ action: 'stop', matched: 2, limitReached: true })
    const done = await call('POST', '/v1/projects/:project/events/retry', body)
    expect(done.body).toMatchObject({ dryRun: false, matched: 3, changed: 3 })
  })
})

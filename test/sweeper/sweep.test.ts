import { beforeEach, describe, expect, it } from 'vitest'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { loadConfig } from '../../lib/config.js'
import { createDeps } from '../../lib/deps.js'
import { createEmfSink } from '../../lib/metrics/emf.js'
import { pushRegistry } from '../../lib/metrics/push.js'
import { createMetrics } from '../../lib/metrics/registry.js'
import { signalsFor, sweep } from '../../lib/sweeper/sweep.js'
import { createContext } from '../helpers/lambda.js'
import { parseSamples } from '../helpers/prom.js'
import { useHarness, type Harness } from '../helpers/harness.js'
import { pushgatewayBinary, requireBinary, scrape } from '../helpers/pushgateway.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'

const hasPushgateway = requireBinary('prometheus-pushgateway', pushgatewayBinary())

describe('how many signals the sweeper sends', () => {
  const backlog = (created: number, retrying = 0, processing = 0) => ({
    project: 'p',
    due: { created, retrying, processing },
    oldestDueAgeSeconds: 0,
    failed: 0,
  })
  it('sends none when nothing is due, one for a small backlog, up to the parallelism for a large one', () => {
    expect(signalsFor(undefined, 500, 4)).toBe(0)
    expect(signalsFor(backlog(0), 500, 4)).toBe(0)
    expect(signalsFor(backlog(3), 500, 4)).toBe(1)
    expect(signalsFor(backlog(600, 200, 200), 500, 4)).toBe(2)
    expect(signalsFor(backlog(100_000), 500, 4)).toBe(4)
  })
})

describe.skipIf(!hasPushgateway)('the sweeper', () => {
  const env = useHarness({
    pushgateway: true,
    config: {
      SWEEPER_EVENTS_PER_SIGNAL: '100',
      DISPATCH_MAX_CONCURRENCY: '4',
      METRICS_STALE_GROUP_SECONDS: '2',
      METRICS_INSTANCE: 'sweeper-env',
    },
  })
  const run = () => createSweeper(() => env.deps)({}, createContext(60_000))
  const samples = async () => parseSamples(await scrape(env.pushgateway.url))
  beforeEach(async () => {
    await env.deps.db.query('DELETE FROM actions_event; DELETE FROM actions_schema')
  })

  it('re-drives what no signal will wake: lost signals, expired leases, far retries that came due', async () => {
    for (const p of ['idle', 'lost', 'lease', 'far', 'big', 'future']) await schemaFor(env.deps, p, { t: { url: 'http://127.0.0.1:9' } })
    await enqueueMany(env.deps, 'lost', 'to_t', 3)
    const [leased] = await enqueueMany(env.deps, 'lease', 'to_t', 1)
    await env.deps.db.query(`UPDATE actions_event SET state = 'processing', lease_until = now() - interval '1 second' WHERE id = $1`, [
      leased,
    ])
    const [far] = await enqueueMany(env.deps, 'far', 'to_t', 1)
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'retrying', num_retries = 5, visible_at = now() - interval '1 second' WHERE id = $1`,
      [far],
    )
    await enqueueMany(env.deps, 'big', 'to_t', 1000)
    const [later] = await enqueueMany(env.deps, 'future', 'to_t', 1)
    await env.deps.db.query(`UPDATE actions_event SET state = 'retrying', visible_at = now() + interval '1 hour' WHERE id = $1`, [later])
    await env.queue.drain()

    const res = await run()
    expect(res.signals).toEqual({ lost: 1, lease: 1, far: 1, big: 4 })
    const sent = (await env.queue.drain()).map(b => (b as { project: string }).project).sort()
    expect(sent).toEqual(['big', 'big', 'big', 'big', 'far', 'lease', 'lost'])
  })

  it('pushes a heartbeat and exact backlog gauges per project, and drops a removed project', async () => {
    await schemaFor(env.deps, 'alpha', { t: { url: 'http://127.0.0.1:9' } })
    await schemaFor(env.deps, 'beta', { t: { url: 'http://127.0.0.1:9' } })
    await enqueueMany(env.deps, 'alpha', 'to_t', 5)
    const retrying = await enqueueMany(env.deps, 'alpha', 'to_t', 2, 5)
    await env.deps.db.query(`UPDATE actions_event SET state = 'retrying', visible_at = now() - interval '90 seconds' WHERE id = ANY($1)`, [
      retrying,
    ])
    const failed = await enqueueMany(env.deps, 'beta', 'to_t', 3)
    await env.deps.db.query(`UPDATE actions_event SET state = 'failed', resolved_at = now(), failed_at = now() WHERE id = ANY($1)`, [
      failed,
    ])
    const before = Date.now() / 1000

    await run()
    let s = await samples()
    const value = (name: string, labels: Record<string, string>) =>
      s.find(
        x => x.name === name && x.labels.job === 'contember_actions_sweeper' && Object.entries(labels).every(([k, v]) => x.labels[k] === v),
      )?.value
    // alpha has events due for 90 s and no dispatch progress: its heartbeat is when they became due.
    expect(value('contember_actions_worker_heartbeat_timestamp_seconds', { contember_project: 'alpha' })).toBeGreaterThanOrEqual(
      Math.floor(before) - 95,
    )
    expect(value('contember_actions_worker_heartbeat_timestamp_seconds', { contember_project: 'alpha' })).toBeLessThan(before - 85)
    expect(value('contember_actions_worker_heartbeat_timestamp_seconds', { contember_project: 'beta' })).toBeGreaterThanOrEqual(
      Math.floor(before),
    )
    expect(value('contember_actions_due_events', { contember_project: 'alpha', state: 'created' })).toBe(5)
    expect(value('contember_actions_due_events', { contember_project: 'alpha', state: 'retrying' })).toBe(2)
    expect(value('contember_actions_due_events', { contember_project: 'beta', state: 'created' })).toBe(0)
    expect(value('contember_actions_oldest_due_event_age_seconds', { contember_project: 'alpha' })).toBeGreaterThanOrEqual(89)
    expect(value('contember_actions_oldest_due_event_age_seconds', { contember_project: 'alpha' })).toBeLessThan(120)
    expect(value('contember_actions_failed_events', { contember_project: 'beta' })).toBe(3)

    // beta disappears: its heartbeat series must go, as the seed's dispose() does; its failed events
    // still need an operator, so their gauge stays.
    await env.deps.db.query(`DELETE FROM actions_schema WHERE project = 'beta'`)
    await run()
    s = await samples()
    expect(value('contember_actions_worker_heartbeat_timestamp_seconds', { contember_project: 'alpha' })).toBeDefined()
    expect(value('contember_actions_worker_heartbeat_timestamp_seconds', { contember_project: 'beta' })).toBeUndefined()
    expect(value('contember_actions_failed_events', { contember_project: 'beta' })).toBe(3)
    // Once its failed events are gone too, nothing of beta is left.
    await env.deps.db.query(`DELETE FROM actions_event WHERE project = 'beta'`)
    await run()
    s = await samples()
    expect(s.filter(x => x.labels.job === 'contember_actions_sweeper' && x.labels.contember_project === 'beta')).toEqual([])
  })

  it('pushes 1 per paused target (and per gone one) from actions_target_health, and drops the series once resumed', async () => {
    await env.deps.db.query('DELETE FROM actions_target_health')
    await schemaFor(env.deps, 'shop', {
      down: { url: 'http://127.0.0.1:9' },
      gone: { url: 'http://127.0.0.1:9' },
      flaky: { url: 'http://127.0.0.1:9' },
    })
    await env.deps.db
      .query(`INSERT INTO actions_target_health (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms) VALUES
      ('shop', 'down', 5, now(), now(), 'failures', now() + interval '30 seconds', 30000),
      ('shop', 'gone', 1, now(), now(), 'gone', NULL, NULL),
      ('shop', 'flaky', 2, now(), NULL, NULL, NULL, NULL),
      ('blog', 'hook', 0, NULL, now(), 'operator', NULL, NULL)`)
    const series = async (name: string) =>
      (await samples())
        .filter(x => x.name === name && x.labels.job === 'contember_actions_sweeper')
        .map(x => `${x.labels.contember_project}/${x.labels.target}=${x.value}`)
        .sort()

    const { gauges } = await sweep(env.deps, { remainingMs: () => 60_000 })
    expect(await series('contember_actions_target_paused')).toEqual(['blog/hook=1', 'shop/down=1', 'shop/gone=1'])
    expect(await series('contember_actions_target_gone')).toEqual(['shop/gone=1'])
    // Every paused target with why, from a fixed set, and its waiting events (none here).
    const why = (await samples())
      .filter(x => x.name === 'contember_actions_paused_target_events' && x.labels.job === 'contember_actions_sweeper')
      .map(x => `${x.labels.contember_project}/${x.labels.target}:${x.labels.reason}=${x.value}`)
      .sort()
    expect(why).toEqual(['blog/hook:operator=0', 'shop/down:down=0', 'shop/gone:misconfigured=0'])
    // The same gauges as EMF: one value per project and target, only for paused ones.
    const logs = env.captureLogs()
    await createEmfSink('Test/Actions').gauges(gauges, env.log)
    logs.restore()
    const emf = logs
      .records()
      .filter(r => 'TargetPaused' in r || 'TargetGone' in r)
      .map(r => `${String(r.Project)}/${String(r.Target)}:${'TargetPaused' in r ? 'P' : ''}${'TargetGone' in r ? 'G' : ''}`)
      .sort()
    expect(emf).toEqual(['blog/hook:P', 'shop/down:P', 'shop/gone:PG'])

    // Resumed (the row cleared) and recovered (pause lifted, run kept by the breaker): both series go.
    await env.deps.db.query(`DELETE FROM actions_target_health WHERE target = 'gone'`)
    await env.deps.db.query(
      `UPDATE actions_target_health SET paused_at = NULL, paused_reason = NULL, probe_at = NULL WHERE target = 'down'`,
    )
    await run()
    expect(await series('contember_actions_target_paused')).toEqual(['blog/hook=1'])
    expect(await series('contember_actions_target_gone')).toEqual([])
    await env.deps.db.query('DELETE FROM actions_target_health')
  })

  it('deletes counter groups that stopped pushing, keeping fresh ones', async () => {
    const metrics = createMetrics()
    metrics.forProject('x').succeeded(1)
    const push = (instance: string) =>
      pushRegistry(env.pushgateway.url, metrics.registry, { job: 'contember_actions', instance }, { replace: false, timeoutMs: 2000 })
    await push('dead-env')
    await new Promise(r => setTimeout(r, 2_500))
    await push('live-env')
    const res = await run()
    expect(res.deletedGroups).toBe(1)
    const instances = new Set((await samples()).filter(x => x.labels.job === 'contember_actions').map(x => x.labels.instance))
    expect(instances.has('dead-env')).toBe(false)
    expect(instances.has('live-env')).toBe(true)
  })

  it('deletes old succeeded and stopped events in bounded batches, keeping failed ones unless told', async () => {
    await schemaFor(env.deps, 'ret', { t: { url: 'http://127.0.0.1:9' } })
    const ids = await enqueueMany(env.deps, 'ret', 'to_t', 30)
    await env.deps.db.query(`UPDATE actions_event SET state = 'succeed', resolved_at = now() - interval '8 days' WHERE id = ANY($1)`, [
      ids.slice(0, 20),
    ])
    await env.deps.db.query(`UPDATE actions_event SET state = 'stopped', resolved_at = now() - interval '8 days' WHERE id = ANY($1)`, [
      ids.slice(20, 24),
    ])
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'failed', resolved_at = now() - interval '8 days', failed_at = now() - interval '8 days' WHERE id = ANY($1)`,
      [ids.slice(24, 27)],
    )
    await env.deps.db.query(`UPDATE actions_event SET state = 'succeed', resolved_at = now() - interval '1 day' WHERE id = ANY($1)`, [
      ids.slice(27),
    ])
    const small = createDeps(loadConfig({ ...envOf(env), RETENTION_BATCH_SIZE: '7' }), {
      db: env.deps.db,
      signals: env.deps.signals,
      log: env.log,
    })
    const res = await sweep(small, { remainingMs: () => 60_000 })
    expect(res.deletedResolved).toBe(24)
    const left = await env.deps.db.query(
      `SELECT state, count(*)::int AS n FROM actions_event WHERE project = 'ret' GROUP BY state ORDER BY state`,
    )
    expect(left.rows).toEqual([
      { state: 'succeed', n: 3 },
      { state: 'failed', n: 3 },
    ])
    const withFailed = createDeps(loadConfig({ ...envOf(env), RETENTION_INCLUDE_FAILED: 'true' }), {
      db: env.deps.db,
      signals: env.deps.signals,
      log: env.log,
    })
    expect((await sweep(withFailed, { remainingMs: () => 60_000 })).deletedResolved).toBe(3)
    // RETENTION_DAYS=0 keeps everything, as upstream does, even with failed events included.
    await env.deps.db.query(`UPDATE actions_event SET resolved_at = now() - interval '3650 days' WHERE project = 'ret'`)
    const forever = createDeps(loadConfig({ ...envOf(env), RETENTION_DAYS: '0', RETENTION_INCLUDE_FAILED: 'true' }), {
      db: env.deps.db,
      signals: env.deps.signals,
      log: env.log,
    })
    expect((await sweep(forever, { remainingMs: () => 60_000 })).deletedResolved).toBe(0)
    expect((await env.deps.db.query(`SELECT count(*)::int AS n FROM actions_event WHERE project = 'ret'`)).rows[0].n).toBe(3)
  })
})

function envOf(env: Harness): Record<string, string> {
  const c = env.deps.config
  return { DATABASE_URL: c.DATABASE_URL, SIGNAL_QUEUE_URL: c.SIGNAL_QUEUE_URL }
}

describe.skipIf(!hasPushgateway)('the sweeper and paused targets', () => {
  const env = useHarness({ pushgateway: true })

  it("leaves a paused target's events out of the due gauges and re-drive, counts them per target and reason, and signals a due probe", async () => {
    await schemaFor(env.deps, 'mixed', { ok: { url: 'http://127.0.0.1:9' }, off: { url: 'http://127.0.0.1:9' } })
    await enqueueMany(env.deps, 'mixed', 'to_ok', 2)
    await enqueueMany(env.deps, 'mixed', 'to_off', 5, 100)
    await env.deps.db.query(`UPDATE actions_event SET visible_at = now() - interval '10 minutes' WHERE target = 'off'`)
    await env.deps.db
      .query(`INSERT INTO actions_target_health (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms)
      VALUES ('mixed', 'off', 5, now(), now(), 'failures', now() - interval '1 second', 30000)`)
    await env.queue.drain()
    const { gauges, signals } = await sweep(env.deps, { remainingMs: () => 60_000 })
    const value = async (g: 'dueEvents' | 'oldestDueAge' | 'pausedEvents' | 'pausedOldestAge', labels: Record<string, string>) => {
      const { values } = await gauges[g].get()
      return values.find(v => Object.entries(labels).every(([k, x]) => Object.entries(v.labels).some(([lk, lv]) => lk === k && lv === x)))
        ?.value
    }
    expect(await value('dueEvents', { contember_project: 'mixed', state: 'created' })).toBe(2)
    expect(await value('oldestDueAge', { contember_project: 'mixed' })).toBeLessThan(60)
    expect(await value('pausedEvents', { contember_project: 'mixed', target: 'off', reason: 'down' })).toBe(5)
    expect(await value('pausedOldestAge', { contember_project: 'mixed', target: 'off', reason: 'down' })).toBeGreaterThanOrEqual(599)
    // Two events of the healthy target are one signal's worth; the due probe alone would be one too.
    expect(signals).toEqual({ mixed: 1 })
    await env.deps.db.query(`DELETE FROM actions_event WHERE target = 'ok'`)
    await env.queue.drain()
    expect((await sweep(env.deps, { remainingMs: () => 60_000 })).signals).toEqual({ mixed: 1 })
    await env.deps.db.query(`UPDATE actions_target_health SET probe_at = now() + interval '1 minute'`)
    expect((await sweep(env.deps, { remainingMs: () => 60_000 })).signals).toEqual({})
  })
})

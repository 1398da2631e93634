import { describe, expect, it } from 'vitest'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { createSweeperGauges } from '../../lib/metrics/registry.js'
import { heartbeatOf, OVERDUE_GRACE_SECONDS } from '../../lib/sweeper/heartbeat.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { createContext } from '../helpers/lambda.js'
import { parseSamples } from '../helpers/prom.js'
import { useHarness } from '../helpers/harness.js'
import { pushgatewayBinary, requireBinary, scrape } from '../helpers/pushgateway.js'

const hasPushgateway = requireBinary('prometheus-pushgateway', pushgatewayBinary())
const HEARTBEAT = 'contember_actions_worker_heartbeat_timestamp_seconds'

describe('the heartbeat value', () => {
  const backlog = (oldestDueAgeSeconds: number) => ({
    project: 'p',
    due: { created: 1, retrying: 0, processing: 0 },
    oldestDueAgeSeconds,
    failed: 0,
  })
  it('is the pass time while nothing is due, or due only within the grace', () => {
    expect(heartbeatOf(undefined, undefined, 1_000)).toBe(1_000)
    expect(heartbeatOf(backlog(OVERDUE_GRACE_SECONDS), 500, 1_000)).toBe(1_000)
  })
  it('is the last progress once something is overdue, so a busy but progressing project stays fresh', () => {
    expect(heartbeatOf(backlog(600), 990, 1_000)).toBe(990)
  })
  it('never predates the moment the oldest due event became due, with or without any progress', () => {
    expect(heartbeatOf(backlog(120), 100, 1_000)).toBe(880)
    expect(heartbeatOf(backlog(120), undefined, 1_000)).toBe(880)
  })
})

describe('the heartbeat help text', () => {
  it('describes what the sweeper writes, in seconds, and no dispatch loop this system does not have', async () => {
    const [hb] = await createSweeperGauges().registry.getMetricsAsJSON()
    expect(hb?.name).toBe(HEARTBEAT)
    expect(hb?.help).toMatch(/Unix timestamp in seconds/)
    expect(hb?.help).toMatch(/sweeper/)
    expect(hb?.help).toMatch(/last time dispatch recorded an outcome/)
    expect(hb?.help).not.toMatch(/loop|iteration|supervisor/)
  })
})

describe.skipIf(!hasPushgateway)('the heartbeat the sweeper pushes', () => {
  const env = useHarness({ pushgateway: true, receiver: true })
  const sweep = () => createSweeper(() => env.deps)({}, createContext(60_000))
  const forever = { remainingMs: () => 60_000 }
  const heartbeats = async () => {
    const s = parseSamples(await scrape(env.pushgateway.url)).filter(
      x => x.name === HEARTBEAT && x.labels.job === 'contember_actions_sweeper',
    )
    return Object.fromEntries(s.map(x => [x.labels.contember_project ?? '', x.value]))
  }
  const progressOf = async (project: string) =>
    (
      await env.deps.db.query<{ at: number }>(
        `SELECT extract(epoch FROM progressed_at)::float8 AS at FROM actions_dispatch_progress WHERE project = $1`,
        [project],
      )
    ).rows[0]?.at
  const dbNow = async () =>
    (await env.deps.db.query<{ now: number }>(`SELECT extract(epoch FROM now())::float8 AS now`)).rows[0]?.now ?? NaN
  const tick = () => new Promise(r => setTimeout(r, 1_100))

  it('goes stale within one sweep when dispatch stops making progress on due events, and stays fresh while idle', async () => {
    await schemaFor(env.deps, 'busy', { t: { url: env.rx.url } })
    await schemaFor(env.deps, 'idle', { t: { url: env.rx.url } })
    // Dispatch works: a real drain delivers and records its progress.
    await enqueueMany(env.deps, 'busy', 'to_t', 3)
    expect((await drainProject(env.deps, 'busy', forever)).succeeded).toBe(3)
    const progressed = await progressOf('busy')
    expect(progressed).toBeDefined()

    await tick()
    const pass1 = await dbNow()
    await sweep()
    const first = await heartbeats()
    // Nothing due anywhere: both carry the pass time.
    expect(first.busy).toBeGreaterThanOrEqual(pass1)
    expect(first.idle).toBeGreaterThanOrEqual(pass1)

    // Dispatch stops: new events wait, and have been due for longer than a sweep interval.
    await enqueueMany(env.deps, 'busy', 'to_t', 5)
    await env.deps.db.query(
      `UPDATE actions_event SET visible_at = now() - make_interval(secs => $1) WHERE project = 'busy' AND state = 'created'`,
      [OVERDUE_GRACE_SECONDS + 30],
    )
    await tick()
    await sweep()
    const second = await heartbeats()
    // Stale at once: it stays at the last progress, older than the previous pass; idle moves on.
    expect(second.busy).toBeCloseTo(progressed ?? NaN, 3)
    expect(second.busy).toBeLessThan(first.busy ?? NaN)
    expect(second.idle).toBeGreaterThan(first.idle ?? NaN)

    // Dispatch resumes: the heartbeat is fresh again at the next sweep.
    expect((await drainProject(env.deps, 'busy', forever)).succeeded).toBe(5)
    await tick()
    const pass3 = await dbNow()
    await sweep()
    const third = await heartbeats()
    expect(third.busy).toBeGreaterThanOrEqual(pass3)
    expect(third.idle).toBeGreaterThanOrEqual(pass3)
  })

  it('keeps a stuck project stale however many sweeps pass, and never earlier than its work became due', async () => {
    await schemaFor(env.deps, 'neverran', { t: { url: env.rx.url } })
    await enqueueMany(env.deps, 'neverran', 'to_t', 2)
    await env.deps.db.query(`UPDATE actions_event SET visible_at = now() - interval '10 minutes' WHERE project = 'neverran'`)
    const dueSince = (await dbNow()) - 600
    await sweep()
    const a = (await heartbeats()).neverran
    await tick()
    await sweep()
    const b = (await heartbeats()).neverran
    expect(a).toBeCloseTo(dueSince, 0)
    expect(b).toBeCloseTo(dueSince, 0)
  })
})

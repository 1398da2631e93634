import { listProjects } from '../db/schemas.js'
import { dueTotal, readBacklog, readPausedTargets, type PausedTarget, type ProjectBacklog } from '../db/backlog.js'
import { deleteResolved, giveUpPaused } from '../db/retention.js'
import { trimTrends } from '../db/trends.js'
import { pauseKind } from '../db/pauses.js'
import { readProgress } from '../db/progress.js'
import type { Deps } from '../deps.js'
import type { Logger } from '../log.js'
import { createSweeperGauges, type SweeperGauges } from '../metrics/registry.js'
import { deleteStaleGroups } from '../metrics/push.js'
import { heartbeatOf } from './heartbeat.js'
import { emitOps } from '../ops.js'

export type SweepOptions = {
  /** Time left in this invocation; retention stops well before it runs out. */
  remainingMs: () => number
  /** This environment's own counter group, never deleted as stale. */
  ownInstance?: string
}

export type SweepResult = {
  projects: string[]
  /** Events failed because their target was paused longer than PAUSED_GIVE_UP_HOURS, by project. */
  gaveUp: Record<string, number>
  /** Signals sent per project. */
  signals: Record<string, number>
  deletedResolved: number
  deletedGroups: number
  gauges: SweeperGauges
}

/** Retention (and stale-group cleanup) stops when less than this is left of the invocation. */
const RETENTION_RESERVE_MS = 15_000
/** At most this many retention batches per pass; the next pass continues. */
const MAX_RETENTION_BATCHES = 50

/**
 * One sweeper pass: re-drive every project with due events (signals in proportion to its backlog, up
 * to the dispatch parallelism), set heartbeats (./heartbeat.ts), exact backlog gauges and paused targets, push them
 * with replace semantics, delete stale metric groups, and apply retention to resolved events.
 */
export async function sweep(deps: Deps, opts: SweepOptions): Promise<SweepResult> {
  const log = deps.log.child({ loc: 'sweeper' })
  const [projects, backlog, { nowSeconds, progress }, paused] = await Promise.all([
    listProjects(deps.db),
    readBacklog(deps.db),
    readProgress(deps.db),
    readPausedTargets(deps.db),
  ])
  // Active: a stored schema, or due events (without a schema they still need driving, to fail as
  // unknown target). A removed project whose events are all resolved is not active: no heartbeat.
  const active = [...new Set([...projects, ...[...backlog.values()].filter(b => dueTotal(b) > 0).map(b => b.project)])].sort()
  const signals = await redrive(deps, log, active, backlog, paused)

  const gauges = createSweeperGauges()
  setBacklogGauges(gauges, active, backlog, progress, nowSeconds)
  setPausedGauges(gauges, paused)
  // Every enabled sink (Pushgateway with replace semantics, EMF) from one call; it never throws.
  await deps.sinks.gauges(gauges, log)
  const deletedGroups = await deleteStaleMetricGroups(deps, log, opts)

  const gaveUp = await giveUp(deps, log)
  const deletedResolved = await applyRetention(deps, opts)
  // The console's trend rollup keeps a day (lib/db/trends.ts); a failed trim only leaves old minutes a pass longer.
  if (opts.remainingMs() > RETENTION_RESERVE_MS)
    await trimTrends(deps.db).catch((e: unknown) =>
      log.warn('Could not trim the trend rollup', { errorName: e instanceof Error ? e.name : typeof e }),
    )
  log.info('Sweep finished', { projects: active.length, signalled: Object.keys(signals).length, deletedResolved, deletedGroups })
  return { projects: active, signals, gaveUp: Object.fromEntries(gaveUp), deletedResolved, deletedGroups, gauges }
}

/** Sends each active project the signals its backlog calls for; returns what was sent (nothing when sending failed). */
async function redrive(
  deps: Deps,
  log: Logger,
  active: readonly string[],
  backlog: Map<string, ProjectBacklog>,
  paused: readonly PausedTarget[],
): Promise<Record<string, number>> {
  const signals: Record<string, number> = {}
  // A paused target's backlog is not due work, but its due probe is: one signal for it (a drain left a
  // delayed one, which may have been lost).
  const probing = new Set(paused.filter(p => p.probeDue).map(p => p.project))
  const wanted = active
    .map(project => ({
      project,
      count: Math.max(
        signalsFor(backlog.get(project), deps.config.SWEEPER_EVENTS_PER_SIGNAL, deps.config.DISPATCH_MAX_CONCURRENCY),
        probing.has(project) ? 1 : 0,
      ),
    }))
    .filter(w => w.count > 0)
  try {
    await deps.signals.sendMany(wanted)
    for (const w of wanted) signals[w.project] = w.count
  } catch (error) {
    log.error('Could not send re-drive signals; the next pass tries again', { error, projects: wanted.map(w => w.project) })
  }
  return signals
}

/** Heartbeats of the active projects and backlog gauges of every project with events. */
function setBacklogGauges(
  gauges: SweeperGauges,
  active: readonly string[],
  backlog: Map<string, ProjectBacklog>,
  progress: Map<string, number>,
  nowSeconds: number,
): void {
  // Backlog gauges also cover failed events left by a removed project: they still need an operator.
  for (const project of new Set([...active, ...backlog.keys()])) {
    const b = backlog.get(project)
    const labels = { contember_project: project }
    if (active.includes(project)) gauges.heartbeat.set(labels, heartbeatOf(b, progress.get(project), nowSeconds))
    for (const state of ['created', 'retrying', 'processing'] as const) gauges.dueEvents.set({ ...labels, state }, b?.due[state] ?? 0)
    gauges.oldestDueAge.set(labels, b?.oldestDueAgeSeconds ?? 0)
    gauges.failedEvents.set(labels, b?.failed ?? 0)
  }
}

/** Gauges of the paused targets only: a resumed one has no series, and the replacing push removes its last one. */
function setPausedGauges(gauges: SweeperGauges, paused: readonly PausedTarget[]): void {
  for (const p of paused) {
    const labels = { contember_project: p.project, target: p.target }
    gauges.targetPaused.set(labels, 1)
    const why = { ...labels, reason: pauseKind(p.reason) }
    gauges.pausedEvents.set(why, p.waiting)
    gauges.pausedOldestAge.set(why, p.oldestAgeSeconds)
    // Waiting for an operator: a 410 Gone, or any misconfiguration.
    if (p.reason === 'gone' || p.reason === 'misconfigured') gauges.targetGone.set(labels, 1)
  }
}

/** Deletes the Pushgateway's stale metric groups while time allows; returns how many (0 without a Pushgateway, or on failure). */
async function deleteStaleMetricGroups(deps: Deps, log: Logger, opts: SweepOptions): Promise<number> {
  const url = deps.config.PUSHGATEWAY_URL
  if (!url) return 0
  try {
    return await deleteStaleGroups(url, {
      maxAgeSeconds: deps.config.METRICS_STALE_GROUP_SECONDS,
      timeoutMs: deps.config.PUSHGATEWAY_TIMEOUT_MS,
      ownInstance: opts.ownInstance,
      hasTime: () => opts.remainingMs() >= RETENTION_RESERVE_MS,
    })
  } catch (error) {
    log.warn('Could not clean up stale metric groups', { error })
    return 0
  }
}

/** PAUSED_GIVE_UP_HOURS: waiting has a bound; what gave up is counted as failed, like every terminal failure. */
async function giveUp(deps: Deps, log: Logger): Promise<Map<string, number>> {
  const gaveUp =
    deps.config.PAUSED_GIVE_UP_HOURS > 0
      ? await giveUpPaused(deps.db, deps.config.PAUSED_GIVE_UP_HOURS, deps.config.RETENTION_BATCH_SIZE)
      : new Map<string, number>()
  for (const [project, n] of gaveUp) {
    deps.metrics.forProject(project).failed(n)
    log.error('Gave up events of a target paused longer than PAUSED_GIVE_UP_HOURS; bulk retry brings them back', { project, events: n })
  }
  await emitOps(
    deps,
    [...gaveUp].map(([project, events]) => ({ kind: 'events.gave_up' as const, project, events })),
  )
  return gaveUp
}

/** Retention in batches while time allows; returns how many resolved events it deleted. */
async function applyRetention(deps: Deps, opts: SweepOptions): Promise<number> {
  let deleted = 0
  // RETENTION_DAYS=0: every event is kept (upstream's behaviour).
  for (let i = 0; deps.config.RETENTION_DAYS > 0 && i < MAX_RETENTION_BATCHES && opts.remainingMs() > RETENTION_RESERVE_MS; i++) {
    const n = await deleteResolved(
      deps.db,
      deps.config.RETENTION_DAYS,
      deps.config.RETENTION_INCLUDE_FAILED,
      deps.config.RETENTION_BATCH_SIZE,
    )
    deleted += n
    if (n < deps.config.RETENTION_BATCH_SIZE) break
  }
  return deleted
}

/** None when nothing is due, one for a small backlog, more for a large one, never above the dispatch parallelism. */
export function signalsFor(backlog: ProjectBacklog | undefined, eventsPerSignal: number, maxConcurrency: number): number {
  const due = backlog ? dueTotal(backlog) : 0
  if (due === 0) return 0
  return Math.min(maxConcurrency, Math.ceil(due / eventsPerSignal))
}

import { DUE, headOfKey, unresolved } from './due.js'
import type { Queryable } from './pool.js'
import type { PauseReason } from './pauses.js'

/** Per project: due events by state, the oldest due event's age, and events waiting in `failed`. */
export type ProjectBacklog = {
  project: string
  due: { created: number; retrying: number; processing: number }
  oldestDueAgeSeconds: number
  failed: number
}

/** Events due now across all due states. */
export function dueTotal(b: ProjectBacklog): number {
  return b.due.created + b.due.retrying + b.due.processing
}

/**
 * How long a capped target's backlog counts as flowing after its last claim (lib/db/flow.ts): its
 * events wait for the caps, not for a stuck dispatch, so they stay out of the oldest-due age (they are
 * still counted as due, and the heartbeat still goes stale if dispatch stops making progress).
 */
export const CAPPED_FLOWING_SECONDS = 300

// Events behind an earlier event of their ordering key wait for it, not for dispatch: not due.
export const DUE_BACKLOG_SQL = `SELECT project, state, count(*) AS n,
    extract(epoch FROM now() - min(visible_at) FILTER (WHERE NOT EXISTS (
      SELECT 1 FROM actions_target_flow f WHERE f.project = actions_event.project AND f.target = actions_event.target
        AND f.claimed_at > now() - ${CAPPED_FLOWING_SECONDS} * interval '1 second')))::float8 AS oldest_s
  FROM actions_event
  WHERE ${DUE} AND ${headOfKey('actions_event')}
    -- A paused target's events wait for a probe or an operator, not for dispatch (readPausedTargets counts them).
    AND NOT EXISTS (SELECT 1 FROM actions_target_health h WHERE h.project = actions_event.project AND h.target = actions_event.target AND h.paused_at IS NOT NULL)
  GROUP BY project, state`

// `failed_at` is set with the failed state and cleared with it: the failed index's predicate (migration 017).
export const FAILED_COUNT_SQL = `SELECT project, count(*) AS n FROM actions_event WHERE failed_at IS NOT NULL GROUP BY project`

/**
 * Reads every project's exact backlog. Both statements stay on partial indexes (due states; failed),
 * so resolved history, however large, is never scanned.
 */
export async function readBacklog(db: Queryable): Promise<Map<string, ProjectBacklog>> {
  const [due, failed] = await Promise.all([
    db.query<{ project: string; state: 'created' | 'retrying' | 'processing'; n: string; oldest_s: number | null }>(DUE_BACKLOG_SQL),
    db.query<{ project: string; n: string }>(FAILED_COUNT_SQL),
  ])
  const out = new Map<string, ProjectBacklog>()
  const get = (project: string) => {
    let b = out.get(project)
    if (!b) out.set(project, (b = { project, due: { created: 0, retrying: 0, processing: 0 }, oldestDueAgeSeconds: 0, failed: 0 }))
    return b
  }
  for (const r of due.rows) {
    const b = get(r.project)
    b.due[r.state] = Number(r.n)
    b.oldestDueAgeSeconds = Math.max(b.oldestDueAgeSeconds, r.oldest_s ?? 0)
  }
  for (const r of failed.rows) get(r.project).failed = Number(r.n)
  return out
}

/** A paused target, for the sweeper's paused gauges and its probes' re-drive. */
export type PausedTarget = {
  project: string
  target: string
  reason: PauseReason
  /** Events waiting on it (due, or held), and how long the oldest has been due. */
  waiting: number
  oldestAgeSeconds: number
  /** Its probe is due and an event waits for it: the project needs a signal, which may have been lost. */
  probeDue: boolean
}

/** The paused targets with their events in a due state, for {@link readPausedTargets}. */
export const PAUSED_TARGETS_SQL = `SELECT h.project, h.target, h.paused_reason AS reason, count(e.id)::int AS waiting,
            extract(epoch FROM now() - min(e.visible_at) FILTER (WHERE e.visible_at <= now()))::float8 AS oldest_s,
            coalesce(h.probe_at <= now(), false) AND count(e.id) > 0 AS probe_due
     FROM actions_target_health h
     LEFT JOIN actions_event e ON e.project = h.project AND e.target = h.target AND ${unresolved('e.')}
     WHERE h.paused_at IS NOT NULL
     GROUP BY h.project, h.target, h.paused_reason, h.probe_at
     ORDER BY h.project, h.target`

/** Every paused target with its waiting events (the health table holds one small row per target that ever failed). */
export async function readPausedTargets(db: Queryable): Promise<PausedTarget[]> {
  const { rows } = await db.query<{
    project: string
    target: string
    reason: PausedTarget['reason']
    waiting: number
    oldest_s: number | null
    probe_due: boolean
  }>(PAUSED_TARGETS_SQL)
  return rows.map(r => ({
    project: r.project,
    target: r.target,
    reason: r.reason,
    waiting: r.waiting,
    oldestAgeSeconds: r.oldest_s ?? 0,
    probeDue: r.probe_due,
  }))
}

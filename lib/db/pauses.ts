import type { Queryable } from './pool.js'
import { assertNames } from '../schema/limits.js'

/** Why a target is paused (migrations 003, 011): the breaker (down), a 410 Gone, an operator, or a misconfiguration. */
export type PauseReason = 'failures' | 'gone' | 'operator' | 'misconfigured'

/** One row of actions_target_health as an operator sees it. A target without a row is healthy. */
export type TargetHealth = {
  target: string
  consecutive_failures: number
  failing_since: Date | null
  paused_at: Date | null
  paused_reason: PauseReason | null
  probe_at: Date | null
  /** What misconfigured it: a status (`401`) or our words for a request never made (`Destination not allowed`). */
  pause_detail: string | null
}

/** Every health row of a project, by target name. */
export async function listTargetHealth(db: Queryable, project: string): Promise<TargetHealth[]> {
  const { rows } = await db.query<TargetHealth>(
    `SELECT target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, pause_detail
     FROM actions_target_health WHERE project = $1 ORDER BY target`,
    [project],
  )
  return rows
}

/**
 * Pauses a target for an operator: no probe, so it stays paused until `resumeTarget`. A target that
 * is already paused keeps its pause time and takes the operator's reason. Returns when it was paused.
 */
export async function pauseTarget(db: Queryable, project: string, target: string): Promise<Date> {
  // A name that long cannot be a target (the schema refuses it), and the health key could not hold it.
  assertNames('target', [
    ['project', project],
    ['target', target],
  ])
  const { rows } = await db.query<{ paused_at: Date }>(
    `INSERT INTO actions_target_health AS h (project, target, paused_at, paused_reason)
     VALUES ($1, $2, now(), 'operator')
     ON CONFLICT (project, target) DO UPDATE SET
       paused_at = coalesce(h.paused_at, now()), paused_reason = 'operator',
       probe_at = NULL, probe_interval_ms = NULL, updated_at = now()
     RETURNING paused_at`,
    [project, target],
  )
  const row = rows[0]
  if (!row) throw new Error('pausing the target returned no row')
  return row.paused_at
}

/**
 * Resumes a target: removes its health row, which clears the pause and the failure run alike (no
 * row means healthy). Returns the row as it was, or undefined when the target had none.
 */
export async function resumeTarget(db: Queryable, project: string, target: string): Promise<TargetHealth | undefined> {
  const { rows } = await db.query<TargetHealth>(
    `DELETE FROM actions_target_health WHERE project = $1 AND target = $2
     RETURNING target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, pause_detail`,
    [project, target],
  )
  return rows[0]
}

/** A pause as the gauges label it, from a fixed set: the breaker's (`down`), an operator's, or one an operator must fix. */
export function pauseKind(reason: PauseReason): 'down' | 'misconfigured' | 'operator' {
  return reason === 'failures' ? 'down' : reason === 'operator' ? 'operator' : 'misconfigured'
}

/** How an operator reads a pause: `down` (the breaker probes it), `misconfigured (401)`, or `operator`. */
export function pauseLabel(h: Pick<TargetHealth, 'paused_reason' | 'pause_detail'>): string | undefined {
  if (h.paused_reason === null) return undefined
  const kind = pauseKind(h.paused_reason)
  // A 410 pause from before migration 011 has no detail of its own.
  return kind === 'misconfigured' ? `misconfigured (${h.pause_detail ?? (h.paused_reason === 'gone' ? '410' : '?')})` : kind
}

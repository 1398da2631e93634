import type { ProjectBacklog } from '../db/backlog.js'

/**
 * A due event is *overdue* once it has been due for longer than this: one sweep interval (EventBridge
 * rate(1 minute)). A live dispatch claims a signalled event within seconds, and one whose signal was
 * lost is re-driven by the next pass, so while dispatch keeps up nothing stays due this long.
 */
export const OVERDUE_GRACE_SECONDS = 60

/**
 * The heartbeat of one project (docs/operations.md), in Unix seconds of the database clock:
 * - nothing overdue (idle, or due only for less than the grace): the pass time, so an idle project
 *   stays fresh;
 * - otherwise the last time dispatch made progress on it (an outcome recorded), but never earlier
 *   than the moment its oldest due event became due: until then there was nothing to make progress
 *   on, so dispatch was keeping up. A project whose dispatch has never run still gets a value.
 * So it goes stale exactly when work waits and dispatch is stuck or dead, and by how long.
 */
export function heartbeatOf(backlog: ProjectBacklog | undefined, lastProgressSeconds: number | undefined, nowSeconds: number): number {
  const oldest = backlog?.oldestDueAgeSeconds ?? 0
  if (oldest <= OVERDUE_GRACE_SECONDS) return nowSeconds
  return Math.max(lastProgressSeconds ?? -Infinity, nowSeconds - oldest)
}

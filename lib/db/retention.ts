import { unresolved } from './due.js'
import { appendedLog, droppedAfterAppend } from './log.js'
import type { Queryable } from './pool.js'
import { named } from './sql.js'

/**
 * The sweeper's bounds on what the table keeps: resolved events leave after RETENTION_DAYS, and events
 * waiting on a target paused longer than PAUSED_GIVE_UP_HOURS fail. Both work in batches of at most
 * `$limit` rows, so one statement never holds many locks or writes much WAL at once.
 */

type DeleteParams = { days: number; limit: number }

/**
 * One retention batch: up to `$limit` resolved events older than `$days`, oldest first, read from the
 * partial index actions_event_resolved_idx (`resolved_at < …` implies its `resolved_at IS NOT NULL`;
 * the state list, literal text, only filters). ANY(ARRAY(…)) makes the batch a list of ids read from the key; "id IN
 * (subquery)" lets the planner hash-join against a scan of the whole table. The filter is repeated
 * outside: another project's event may share an id, and only a row that is itself old and resolved may go.
 */
const deleteStatement = (states: string) => {
  const filter = `state IN (${states}) AND resolved_at < now() - $days * interval '1 day'`
  return named<DeleteParams>()(
    ['days', 'limit'],
    `DELETE FROM actions_event WHERE id = ANY(ARRAY(
    SELECT id FROM actions_event
    WHERE ${filter}
    ORDER BY resolved_at
    LIMIT $limit)) AND ${filter}`,
  )
}

/** Retention of succeeded and stopped events; failed ones wait for an operator. */
export const DELETE_RESOLVED = deleteStatement(`'succeed', 'stopped'`)
/** Retention with RETENTION_INCLUDE_FAILED: failed events go too. */
export const DELETE_RESOLVED_WITH_FAILED = deleteStatement(`'succeed', 'stopped', 'failed'`)

/** Deletes up to `limit` resolved events older than `days`, oldest first; returns how many it deleted. */
export async function deleteResolved(db: Queryable, days: number, includeFailed: boolean, limit: number): Promise<number> {
  const statement = includeFailed ? DELETE_RESOLVED_WITH_FAILED : DELETE_RESOLVED
  const { rowCount } = await db.query(statement.text, statement.values({ days, limit }))
  return rowCount ?? 0
}

/**
 * Fails up to `$limit` waiting events (created, retrying) of targets paused longer than `$hours`,
 * oldest pause first: no request is made, so no attempt is counted, and the log says why (the pause,
 * its start and reason). The filter is repeated outside the batch pick: an event claimed or retried
 * meanwhile is left alone. Returns the count of changed events by project.
 */
export const GIVE_UP = named<{ hours: number; limit: number }>()(
  ['hours', 'limit'],
  `WITH gave_up AS (
    UPDATE actions_event e SET state = 'failed', resolved_at = now(), failed_at = now(), last_state_change = now(),
      log = ${appendedLog(
        'e',
        `jsonb_build_object('ok', false, 'errorMessage',
        'Gave up: the target has been paused since ' || to_char(h.paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        || ' (' || CASE h.paused_reason WHEN 'failures' THEN 'down' WHEN 'gone' THEN 'misconfigured (410)'
                   WHEN 'misconfigured' THEN 'misconfigured (' || coalesce(h.pause_detail, '?') || ')' ELSE h.paused_reason END
        || '), longer than PAUSED_GIVE_UP_HOURS')`,
      )},
      log_dropped = ${droppedAfterAppend('e')}
    FROM actions_target_health h
    WHERE e.id = ANY(ARRAY(
        SELECT w.id FROM actions_target_health p JOIN actions_event w ON w.project = p.project AND w.target = p.target
        WHERE p.paused_at < now() - $hours * interval '1 hour' AND ${unresolved('w.')} AND w.state IN ('created', 'retrying')
        ORDER BY p.paused_at LIMIT $limit))
      AND h.project = e.project AND h.target = e.target AND h.paused_at < now() - $hours * interval '1 hour'
      AND e.state IN ('created', 'retrying')
    RETURNING e.project
  )
  SELECT project, count(*)::int AS n FROM gave_up GROUP BY project`,
)

/** Applies PAUSED_GIVE_UP_HOURS ({@link GIVE_UP}); returns how many events failed, by project. */
export async function giveUpPaused(db: Queryable, hours: number, limit: number): Promise<Map<string, number>> {
  const { rows } = await db.query<{ project: string; n: number }>(GIVE_UP.text, GIVE_UP.values({ hours, limit }))
  return new Map(rows.map(r => [r.project, r.n]))
}

import type { Queryable } from './pool.js'

/** Whether the project has an event due now (any due state). */
export async function hasDueEvents(db: Queryable, project: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM actions_event
     WHERE project = $1 AND state IN ('created', 'retrying', 'processing') AND visible_at <= now() LIMIT 1`,
    [project],
  )
  return rows.length > 0
}

/**
 * Milliseconds until the project's next waiting event (created or retrying) becomes due, or undefined
 * when there is none. Leases of events in processing are left to the sweeper: their dispatcher is usually alive.
 */
export async function msUntilNextDue(db: Queryable, project: string): Promise<number | undefined> {
  const { rows } = await db.query<{ ms: number | null }>(
    `SELECT (extract(epoch FROM min(visible_at) - now()) * 1000)::float8 AS ms
     FROM actions_event WHERE project = $1 AND state IN ('created', 'retrying')`,
    [project],
  )
  const ms = rows[0]?.ms
  return ms === null || ms === undefined ? undefined : Math.max(0, ms)
}

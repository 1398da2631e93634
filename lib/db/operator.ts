import type { EventRow } from './events.js'
import type { Queryable } from './pool.js'

/** The operator listings (upstream's failed / in-processing / due queries). */
export type Listing = 'failed' | 'processing' | 'due'

const LISTINGS: Record<Listing, string> = {
  failed: `state = 'failed' ORDER BY last_state_change DESC`,
  processing: `state = 'processing' AND visible_at > now() ORDER BY visible_at`,
  due: `state IN ('created', 'retrying', 'processing') AND visible_at <= now() ORDER BY priority DESC, visible_at`,
}

/** Lists a project's events of one kind, newest failures first, due events in claim order. */
export async function listEvents(db: Queryable, project: string, listing: Listing, limit: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(`SELECT * FROM actions_event WHERE project = $1 AND ${LISTINGS[listing]} LIMIT $2`, [project, limit])
  return rows
}

/** One event with its log, or undefined. */
export async function getEvent(db: Queryable, id: string): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>('SELECT * FROM actions_event WHERE id = $1', [id])
  return rows[0]
}

/**
 * Makes an event due now: back to `created` if it was never attempted, else `retrying`. Its attempt
 * count is kept, so a replayed event gets one more attempt (the upstream semantics); returns false
 * for an unknown id.
 */
export async function retryEvent(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE actions_event SET
       state = CASE WHEN num_retries = 0 THEN 'created' ELSE 'retrying' END::actions_event_state,
       visible_at = now(), resolved_at = NULL, last_state_change = now()
     WHERE id = $1`,
    [id],
  )
  return rowCount === 1
}

/** Stops an event for good (`stopped`, resolved now); returns false for an unknown id. */
export async function stopEvent(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE actions_event SET state = 'stopped', resolved_at = now(), last_state_change = now() WHERE id = $1`,
    [id],
  )
  return rowCount === 1
}

// The statements behind upstream's event queries: whole rows (payload and log), paged by offset as
// upstream pages them. Each listing selects and orders exactly as the CLI's (lib/db/operator.ts
// LISTINGS), so `failedEvents(args: {limit: 100})` returns the ids `actions events failed P --limit 100` prints.
import { DUE } from '../../db/due.js'
import type { Queryable } from '../../db/pool.js'
import type { Listing } from '../../db/operator.js'
import type { EventRow } from '../../events.js'

const LISTINGS: Record<Listing, string> = {
  failed: `state IN ('failed', 'retrying') ORDER BY last_state_change DESC`,
  processing: `state = 'processing' AND visible_at > now() ORDER BY visible_at`,
  due: `${DUE} ORDER BY priority DESC, visible_at`,
}

/** One page of a project's events of one listing, whole rows, in the CLI's order. */
export async function pageEvents(db: Queryable, project: string, listing: Listing, limit: number, offset: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(`SELECT * FROM actions_event WHERE project = $1 AND ${LISTINGS[listing]} LIMIT $2 OFFSET $3`, [
    project,
    limit,
    offset,
  ])
  return rows
}

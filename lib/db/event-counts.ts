import type { Queryable } from './pool.js'
import { named } from './sql.js'

/** A project's events counted by state (the local stack's GET /events/<project>); states with none are left out. */
export const EVENTS_BY_STATE = named<{ project: string }>()(
  ['project'],
  `SELECT state, count(*)::int AS n FROM actions_event WHERE project = $project GROUP BY state`,
)

/** How many events of the project are in each state, `{ succeed: 3 }`. */
export async function countEventsByState(db: Queryable, project: string): Promise<Record<string, number>> {
  const { rows } = await db.query<{ state: string; n: number }>(EVENTS_BY_STATE.text, EVENTS_BY_STATE.values({ project }))
  return Object.fromEntries(rows.map(r => [r.state, r.n]))
}

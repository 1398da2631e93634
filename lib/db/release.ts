import type { Queryable } from './pool.js'
import { PROCESSING } from './fence.js'
import { named } from './sql.js'

/**
 * A released event goes back to the state it was claimed from (created if never attempted, else
 * retrying): `processing` with its time come means an attempt that was never recorded, and the claim
 * counts those (lib/db/claim.ts). Its due time and so its place in the queue are kept; only the lease
 * goes, a HOT update like the claim (migration 017). Fenced by lease as a record is. test/fixtures/sql/release.sql holds
 * it whole, as sent.
 */
export const RELEASE = named<{ ids: readonly string[]; leases: readonly string[]; project: string }>()(
  ['ids', 'leases', 'project'],
  `UPDATE actions_event e SET lease_until = NULL,
    state = CASE WHEN e.num_retries = 0 THEN 'created' ELSE 'retrying' END::actions_event_state
  FROM unnest($ids::uuid[], $leases::timestamptz[]) AS u(id, lease)
  WHERE e.id = u.id AND e.project = $project AND ${PROCESSING} AND e.lease_until = u.lease`,
)
/** {@link RELEASE}'s text (bench/profile.ts tells statements apart by it). */
export const RELEASE_SQL = RELEASE.text

/**
 * Hands claimed events of a project back without an attempt (a drain stopping for time, or a lease too
 * close to its end to start a delivery): they are due again at once, their attempt count untouched. Fenced by lease.
 */
export async function releaseClaims(db: Queryable, project: string, claims: ReadonlyArray<{ id: string; lease: string }>): Promise<number> {
  if (claims.length === 0) return 0
  const { rowCount } = await db.query(
    RELEASE.text,
    RELEASE.values({ ids: claims.map(c => c.id), leases: claims.map(c => c.lease), project }),
  )
  return rowCount ?? 0
}

import type { Queryable } from './pool.js'
import { PROCESSING } from './fence.js'
import { named } from './sql.js'

/**
 * A released event goes back to the state it was claimed from (created if never attempted, else
 * retrying): `processing` with its time come means an attempt that was never recorded, and the claim
 * counts those (lib/db/claim.ts). Fenced by lease as a record is. test/fixtures/sql/release.sql holds
 * it whole, as sent.
 */
export const RELEASE = named<{ ids: readonly string[]; leases: readonly string[]; project: string }>()(
  ['ids', 'leases', 'project'],
  `UPDATE actions_event e SET visible_at = now(),
    state = CASE WHEN e.num_retries = 0 THEN 'created' ELSE 'retrying' END::actions_event_state
  FROM unnest($ids::uuid[], $leases::timestamptz[]) AS u(id, lease)
  WHERE e.id = u.id AND e.project = $project AND ${PROCESSING} AND e.visible_at = u.lease`,
)
/** {@link RELEASE}'s text (bench/profile.ts tells statements apart by it). */
export const RELEASE_SQL = RELEASE.text

/**
 * Hands claimed events of a project back without an attempt (a drain stopping for time, or a lease too
 * close to its end to start a delivery): they become due now, their attempt count untouched. Fenced by lease.
 */
export async function releaseClaims(db: Queryable, project: string, claims: ReadonlyArray<{ id: string; lease: string }>): Promise<number> {
  if (claims.length === 0) return 0
  const { rowCount } = await db.query(
    RELEASE.text,
    RELEASE.values({ ids: claims.map(c => c.id), leases: claims.map(c => c.lease), project }),
  )
  return rowCount ?? 0
}

import type { Queryable } from './pool.js'
import { named } from './sql.js'

/**
 * "Unresolved" as the partial index actions_event_due_idx is defined
 * (infra/migrations/017_lease_outside_indexes.sql): every statement that reads unresolved events of
 * a project through that index says it this way, as the planner matches the predicate by its text.
 * The index adds `visible_at IS NOT NULL` (always true) to keep its predicate apart from the key
 * index's, so the per-entity probe ({@link headOfKey}) can only read the key index. A statement
 * implies it by `visible_at <= 'infinity'` (also always true), not by repeating it: Postgres 17 and
 * later drop `IS NOT NULL` of a NOT NULL column from a query, and the index then no longer matches
 * (Postgres 18 scanned the table for PAUSED_TARGETS). `e` is the row's name and a dot, or empty.
 */
export const unresolved = (e = '') => `${e}resolved_at IS NULL AND ${e}visible_at <= 'infinity'`

/**
 * The one spelling of "due" (unresolved, its time come, and not claimed, or claimed with its lease run
 * out) for every statement that asks for due events. A claimed event keeps its place in the due index
 * (the claim writes `lease_until`, which no index covers, so its update is HOT) and is read past here.
 */
export const DUE = `${unresolved()} AND visible_at <= now() AND (lease_until IS NULL OR lease_until <= now())`

/**
 * Per-entity order (migration 006): an event of an ordering key waits while an earlier event of the key
 * (same key, which covers the project and target; smaller `seq`) is unresolved: retrying, in flight, or waiting on a
 * paused target. Only the key's head may be claimed, so a batch never holds two events of a key and
 * at most one request per key is in flight, across every drain. `e` is the outer row's name. One
 * probe of actions_event_key_idx per keyed row; unkeyed rows pay nothing.
 *
 * "Unresolved" is spelled `resolved_at IS NULL`, the key index's own predicate (migration 016), and
 * not by state as the due index is: with both indexes on the same states, statistics taken while few
 * keys existed made the planner answer the probe from the due index (project, seq <), the project's
 * whole backlog per candidate, and claims took seconds at 5,000 events/s (bench/README.md).
 */
export const headOfKey = (e: string) => `(${e}.order_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM actions_event k
        WHERE k.order_key = ${e}.order_key AND k.project = ${e}.project
          AND k.resolved_at IS NULL AND k.seq < ${e}.seq))`

// `held` names targets whose events wait for a schema fix: they are due but no drain will take them,
// so they must not count as work a signal could move.

/**
 * Whether the project has a due event of a target not `held`. Ordered as the due index is on purpose: with a bare LIMIT 1 the planner
 * expects a match within the first few rows of a sequential scan, and scans every resolved event of
 * the project before the due ones (12 ms at 100,000 resolved rows; 0.03 ms from the index).
 */
export const HAS_DUE = named<{ project: string; held: readonly string[] }>()(
  ['project', 'held'],
  `SELECT 1 FROM actions_event
     WHERE project = $project AND ${DUE}
       AND target <> ALL($held::text[]) AND ${headOfKey('actions_event')}
     ORDER BY priority DESC, visible_at LIMIT 1`,
)

/** Whether the project has an event due now (any due state), leaving out events of `held` targets. */
export async function hasDueEvents(db: Queryable, project: string, held: readonly string[] = []): Promise<boolean> {
  const { rows } = await db.query(HAS_DUE.text, HAS_DUE.values({ project, held }))
  return rows.length > 0
}

// A paused target's events wait for its probe (never, without one: an operator resumes it).
// Held by a receiver's Retry-After (migration 007): its events wait for that time.
const PAUSED = `SELECT 1 FROM actions_target_health h WHERE h.project = e.project AND h.target = e.target AND (h.paused_at IS NOT NULL OR h.hold_until > now())`

/**
 * The next time a waiting event (created or retrying) of the project, of a target not `held`, becomes due, in ms from now; null when none waits. First, one ordered probe of the due index: an
 * event of a running target due now answers 0 at once (the usual case under load, when the minimum
 * below would read every waiting event of the backlog: 3.6 ms per drain at 2,000 events/s). Only
 * when nothing is due now is the minimum taken, over what waits (future retries, paused targets).
 * Events behind an earlier event of their ordering key are left out: they wait for it, not for a time.
 */
export const NEXT_DUE = named<{ project: string; held: readonly string[] }>()(
  ['project', 'held'],
  `SELECT CASE
    WHEN EXISTS (
      SELECT 1 FROM actions_event e
      WHERE e.project = $project AND ${DUE} AND e.state <> 'processing' AND e.target <> ALL($held::text[])
        AND NOT EXISTS (${PAUSED}) AND ${headOfKey('e')}
      ORDER BY e.priority DESC, e.visible_at LIMIT 1)
    THEN 0::float8
    ELSE (
      SELECT (extract(epoch FROM min(greatest(e.visible_at, h.probe_at, h.hold_until)) - now()) * 1000)::float8
      FROM actions_event e
      LEFT JOIN actions_target_health h ON h.project = e.project AND h.target = e.target AND (h.paused_at IS NOT NULL OR h.hold_until > now())
      WHERE e.project = $project AND ${unresolved('e.')} AND e.state IN ('created', 'retrying') AND e.target <> ALL($held::text[])
        AND (h.paused_at IS NULL OR h.probe_at IS NOT NULL) AND ${headOfKey('e')})
  END AS ms`,
)

/**
 * Milliseconds until the project's next waiting event (created or retrying) becomes due, or undefined
 * when there is none; events of `held` targets are left out. Leases of events in processing are left
 * to the sweeper: their dispatcher is usually alive.
 */
export async function msUntilNextDue(db: Queryable, project: string, held: readonly string[] = []): Promise<number | undefined> {
  // Prepared once per connection: every drain asks, and planning it cost more than running it.
  const { rows } = await db.query<{ ms: number | null }>({
    name: 'actions_next_due',
    text: NEXT_DUE.text,
    values: NEXT_DUE.values({ project, held }),
  })
  const ms = rows[0]?.ms
  return ms === null || ms === undefined ? undefined : Math.max(0, ms)
}

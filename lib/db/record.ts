import type { Outcome } from '../events.js'
import { cleanText, STORED_ERROR_BYTES, STORED_RESPONSE_BYTES } from '../text.js'
import { MAX_INT32 } from '../schema/limits.js'
import type { Queryable } from './pool.js'

/** One attempt's outcome for one claimed event, with what the retry rule needs. */
export type AttemptRecord = {
  id: string
  /** The `visible_at` the claim set; an event re-claimed by another dispatcher since then is not touched. */
  lease: Date
  outcome: Outcome
  durationMs: number
  maxAttempts: number
  initialRepeatIntervalMs: number
}

export type RecordedRow = { id: string; state: 'succeed' | 'retrying' | 'failed'; num_retries: number; target: string; trigger: string }

/**
 * The fence's state test, as text on purpose. Statistics are gathered while nothing is claimed, so
 * the planner takes `state = 'processing'` for one row and nests a rescan of every outcome inside a
 * scan of the claimed rows: quadratic in the events in flight (35 ms for 350 outcomes; seconds for
 * more). Compared as text, the state gets a default estimate, and the plan becomes a hash join or
 * primary-key lookups.
 */
const PROCESSING = `e.state::text = 'processing'`

// Caps the backoff at about 100 years, so a large maxAttempts cannot overflow the interval type.
const MAX_BACKOFF_MS = 3.15e12

/** $1 ids, $2 leases, $3 ok, $4 log entries, $5 maxAttempts, $6 initialRepeatIntervalMs, $7 backoff cap (ms). */
export const RECORD_SQL = `UPDATE actions_event e SET
    num_retries = e.num_retries + 1,
    state = CASE WHEN u.ok THEN 'succeed'
                 WHEN e.num_retries + 1 >= u.max_attempts THEN 'failed'
                 ELSE 'retrying' END::actions_event_state,
    visible_at = CASE WHEN NOT u.ok AND e.num_retries + 1 < u.max_attempts
                      THEN now() + least(u.interval_ms * power(2, e.num_retries), $7) * interval '1 millisecond'
                      ELSE e.visible_at END,
    resolved_at = CASE WHEN u.ok OR e.num_retries + 1 >= u.max_attempts THEN now() END,
    log = CASE WHEN u.ok THEN e.log ELSE e.log || jsonb_build_array(u.entry) END,
    last_state_change = now()
  FROM unnest($1::uuid[], $2::timestamptz[], $3::bool[], $4::jsonb[], $5::int[], $6::int[])
       AS u(id, lease, ok, entry, max_attempts, interval_ms)
  WHERE e.id = u.id AND ${PROCESSING} AND e.visible_at = u.lease
  RETURNING e.id, e.state, e.num_retries, e.target, e.trigger`

/**
 * Records many attempts in one statement: success → `succeed`; failure → `retrying` at
 * initialRepeatIntervalMs · 2^(attempt − 1) later by the database clock, or `failed` once the event has
 * had maxAttempts attempts. Every failed attempt appends its log entry. Returns the rows it changed.
 */
export async function recordAttempts(db: Queryable, records: readonly AttemptRecord[]): Promise<RecordedRow[]> {
  if (records.length === 0) return []
  const { rows } = await db.query<RecordedRow>({
    name: 'actions_record',
    text: RECORD_SQL,
    values: [
      records.map(r => r.id),
      records.map(r => r.lease),
      records.map(r => r.outcome.ok),
      records.map(r => (r.outcome.ok ? null : JSON.stringify(logEntry(r.outcome, r.durationMs)))),
      // Clamped into the columns' int range: a stored schema from before the limits must not make the
      // statement fail (and the attempt go uncounted) on a cast.
      records.map(r => clampInt(r.maxAttempts, 1)),
      records.map(r => clampInt(r.initialRepeatIntervalMs, 0)),
      MAX_BACKOFF_MS,
    ],
  })
  return rows
}

/**
 * The log entry of a failed attempt: `{ ok: false, code?, errorMessage?, response?, durationMs }`.
 * Its text is made storable here once more (valid, bounded), whoever built the outcome: delivery
 * already redacted it, and a jsonb value Postgres rejects would fail the statement for every row in it.
 */
function logEntry(outcome: Extract<Outcome, { ok: false }>, durationMs: number) {
  return {
    ok: false,
    ...(outcome.code !== undefined ? { code: outcome.code } : {}),
    errorMessage: cleanText(outcome.errorMessage, STORED_ERROR_BYTES),
    ...(outcome.response !== undefined ? { response: cleanText(outcome.response, STORED_RESPONSE_BYTES) } : {}),
    durationMs,
  }
}

function clampInt(value: number, min: number): number {
  return Number.isFinite(value) ? Math.min(MAX_INT32, Math.max(min, Math.trunc(value))) : min
}

/** $1 ids, $2 leases. */
export const RELEASE_SQL = `UPDATE actions_event e SET visible_at = now()
  FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, lease)
  WHERE e.id = u.id AND ${PROCESSING} AND e.visible_at = u.lease`

/**
 * Hands claimed events back without an attempt (a drain stopping for time, or a lease too close to
 * its end to start a delivery): they become due now, their attempt count untouched. Fenced by lease.
 */
export async function releaseClaims(db: Queryable, claims: ReadonlyArray<{ id: string; lease: Date }>): Promise<number> {
  if (claims.length === 0) return 0
  const { rowCount } = await db.query(
    RELEASE_SQL,
    [claims.map(c => c.id), claims.map(c => c.lease)],
  )
  return rowCount ?? 0
}

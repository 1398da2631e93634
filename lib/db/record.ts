import type { Outcome } from '../events.js'
import { DEFAULT_RECORD_SETTINGS, HEALTH_UPSERT, type RecordSettings } from './health.js'
import { PROGRESS_UPSERT } from './progress.js'
import { named } from './sql.js'
import type { Queryable } from './pool.js'
import { appendedLog, droppedAfterAppend } from './log.js'
import { PROCESSING } from './fence.js'
import { breakerParams, recordParams } from './record-values.js'
import type { AttemptRecord, RecordedRow, RecordParams } from './record-types.js'

export type { AttemptRecord, RecordedRow, RecordParams } from './record-types.js'

/**
 * Where each outcome's row is (`row_at`): found through the primary key, one probe per outcome, and
 * updated by its place in the heap, as the claim's update is (lib/db/claim.ts): by the TID list
 * (`AT_ROWS`) and each outcome's own TID. Joined by id alone, the planner hashed the outcomes over a
 * sequential scan of the whole table whenever the table was small and the record large (a few hundred
 * outcomes on the bench's 20,000 rows; test/db/record-plan.test.ts), and `id = ANY(...)` became a
 * filter on that scan. A row changed by another statement after this one's snapshot is left out, as
 * the fence would leave it: every writer of an event in flight (release, stop, retention, a claim
 * after its lease ran out) changes its state or lease.
 */
const ROW_AT = (u: string) => `(SELECT x.ctid FROM actions_event x WHERE x.id = ${u}.id AND x.project = ${u}.project) AS row_at`
/** The outcomes' rows by their TIDs: a TID list, and each outcome's own TID (no rescan of the list per outcome). */
const AT_ROWS = `e.ctid = ANY(ARRAY(SELECT row_at FROM u)) AND e.ctid = u.row_at`

// The attempt would be the event's last (upstream: failed once it has had maxAttempts attempts).
const LAST = `(NOT u.ok AND e.num_retries + 1 >= u.max_attempts)`
/**
 * The breaker's rule: no event fails because its target is down. The last attempt is held (the event
 * stays retrying, the target pauses) when the target answered nothing in this statement and every
 * attempt to it since the event's first failed attempt failed too: its run of failures began no later
 * (a run starting in this statement begins now()), or it answered 410 Gone. Events from before
 * migration 004 count from their creation, which can only withhold the protection, never grant it wrongly.
 * A threshold of 0 turns the breaker off (upstream's rule: a dead target fails its events).
 */
const HOLD = `(${LAST} AND u.kind IN ('down', 'misconfigured') AND $breaker_threshold::int > 0 AND NOT u.answered AND (u.gone OR coalesce(u.run_since, now())
    <= CASE WHEN e.num_retries = 0 THEN now() ELSE coalesce(e.first_failed_at, e.created_at) END))`
/**
 * The event's batch failed as a whole and may hold a poison event: rejected, or a probe of a target
 * paused for failures. Its next attempt travels in a batch of at most `split_to` (half), and it does
 * not fail from such an answer while it still shares its batch: its last attempt is made alone.
 */
const SPLIT = `(NOT u.ok AND u.split_to IS NOT NULL AND (u.kind = 'rejected' OR (u.kind = 'down' AND u.was_paused = 'failures')))`
// A `"retry": false` answer fails its event at once; any other failure only once it was the last attempt.
// With the breaker off ($breaker_threshold = 0, upstream's rule) a batch-wide failure fails its events like any other.
const TERMINAL = `((NOT u.ok AND u.kind = 'final') OR (${LAST} AND NOT ${HOLD} AND NOT (${SPLIT} AND $breaker_threshold::int > 0)))`
// What the receiver asked for (Retry-After as delta-seconds or an HTTP date), in ms by the database clock.
const RETRY_AFTER = `coalesce(u.retry_after_ms, extract(epoch FROM u.retry_at - now())::float8 * 1000)`
// Upstream's backoff, no earlier than the receiver asked (capped), stretched by the jitter fraction.
const DELAY_MS = `greatest(least(u.interval_ms * power(2, e.num_retries), $backoff_cap_ms::float8),
      CASE WHEN ${RETRY_AFTER} IS NOT NULL THEN least(${RETRY_AFTER}, $retry_after_cap_ms::float8) END) * (1 + $jitter::float8 * random())`

/** The general record (see {@link recordAttempts}); test/fixtures/sql/record.sql holds it whole, as sent. */
export const RECORD = named<RecordParams>()(
  [
    'ids',
    'leases',
    'ok',
    'entries',
    'max_attempts',
    'interval_ms',
    'backoff_cap_ms',
    'projects',
    'targets',
    'codes',
    'batches',
    'attempts',
    'retry_after_ms',
    'retry_at',
    'retry_after_cap_ms',
    'breaker_threshold',
    'breaker_rate',
    'breaker_window_ms',
    'probe_ms',
    'probe_cap_ms',
    'jitter',
    'progress',
    'kinds',
    'details',
    'split_to',
  ],
  `WITH u AS MATERIALIZED (
    -- Per target, what this statement saw: answered (an event delivered, or an answer that rejects
    -- events: the target works), gone (a 410), misconfigured (what it answered that needs an operator).
    SELECT r.*,
           bool_or(r.ok OR r.kind IN ('rejected', 'final')) OVER w AND NOT bool_or(coalesce(r.code = 410, false)) OVER w AS answered,
           bool_or(coalesce(r.code = 410, false)) OVER w AS gone,
           max(r.detail) OVER w AS misconfigured,
           h.failing_since AS run_since, h.paused_reason AS was_paused, h.project IS NOT NULL AS known, ${ROW_AT('r')}
    FROM unnest($ids::uuid[], $leases::timestamptz[], $ok::bool[], $entries::jsonb[], $max_attempts::int[], $interval_ms::int[], $projects::text[], $targets::text[],
                $codes::int[], $batches::int[], $attempts::int[], $retry_after_ms::float8[], $retry_at::timestamptz[], $kinds::text[], $details::text[], $split_to::int[])
         AS r(id, lease, ok, entry, max_attempts, interval_ms, project, target, code, batch, attempts, retry_after_ms, retry_at, kind, detail, split_to)
    LEFT JOIN actions_target_health h ON h.project = r.project AND h.target = r.target
    WINDOW w AS (PARTITION BY r.project, r.target)
  ),
  ev AS (
    UPDATE actions_event e SET
      -- Every attempt counts, a held one too: the hold is the state, never a frozen counter.
      num_retries = e.num_retries + 1,
      state = CASE WHEN u.ok THEN 'succeed' WHEN ${TERMINAL} THEN 'failed' ELSE 'retrying' END::actions_event_state,
      -- A held event is due at once: it waits for its target's resume, not for a backoff.
      visible_at = CASE WHEN u.ok OR ${TERMINAL} THEN e.visible_at WHEN ${HOLD} THEN now()
                        ELSE now() + ${DELAY_MS} * interval '1 millisecond' END,
      resolved_at = CASE WHEN u.ok OR ${TERMINAL} THEN now() END,
      failed_at = CASE WHEN NOT u.ok AND ${TERMINAL} THEN now() END,
      lease_until = NULL,
      log = CASE WHEN u.ok THEN e.log ELSE ${appendedLog('e', 'u.entry')} END,
      log_dropped = CASE WHEN u.ok THEN e.log_dropped ELSE ${droppedAfterAppend('e')} END,
      first_failed_at = CASE WHEN u.ok THEN NULL WHEN e.num_retries = 0 THEN now() ELSE coalesce(e.first_failed_at, e.created_at) END,
      batch_cap = CASE WHEN ${SPLIT} THEN least(u.split_to, coalesce(e.batch_cap, u.split_to)) WHEN u.ok THEN NULL ELSE e.batch_cap END,
      last_state_change = now()
    FROM u
    WHERE ${AT_ROWS} AND e.id = u.id AND e.project = u.project AND ${PROCESSING} AND e.lease_until = u.lease
    RETURNING e.id, e.state, e.num_retries, e.project, e.target, e.trigger, e.order_key IS NOT NULL AS keyed,
              NOT u.ok AND e.state = 'retrying' AND e.num_retries >= u.max_attempts AS held
  ),
  seen AS (
    SELECT u.project, u.target, NOT bool_or(u.answered) AS down, bool_or(u.gone) AS gone,
           count(DISTINCT u.batch)::int AS batches, bool_or(u.known) AS known, coalesce(bool_or(ev.held), false) AS held,
           -- A batch that failed as a whole (down or misconfigured) fails each of its events alike.
           count(DISTINCT u.batch) FILTER (WHERE NOT u.ok AND u.kind NOT IN ('rejected', 'final'))::int AS failed_batches,
           max(u.misconfigured) AS misconfigured,
           -- A Retry-After holds the whole target until then (capped as the event's own delay is).
           -- (least() skips NULLs: without the CASE an outcome without Retry-After would hold for the cap.)
           max(CASE WHEN ${RETRY_AFTER} IS NOT NULL THEN now() + least(${RETRY_AFTER}, $retry_after_cap_ms::float8) * interval '1 millisecond' END) AS hold_until
    FROM u LEFT JOIN ev ON ev.id = u.id AND ev.project = u.project
    GROUP BY u.project, u.target
  ),
  ${HEALTH_UPSERT},
  ${PROGRESS_UPSERT},
  changes AS (
    SELECT DISTINCT ON (c.project, c.target) c.project, c.target,
           CASE WHEN c.paused_reason IS NOT NULL AND u.was_paused IS DISTINCT FROM c.paused_reason THEN c.paused_reason END AS paused,
           c.paused_reason IS NULL AND u.was_paused IS NOT NULL AS resumed
    FROM health c JOIN u ON u.project = c.project AND u.target = c.target
  )
  SELECT ev.id, ev.state, ev.num_retries, ev.target, ev.trigger, ev.held, ev.keyed,
         c.paused AS target_paused, coalesce(c.resumed, false) AS target_resumed
  FROM ev LEFT JOIN changes c ON c.project = ev.project AND c.target = ev.target`,
)
/** {@link RECORD}'s text (bench/profile.ts tells statements apart by it). */
export const RECORD_SQL = RECORD.text

/**
 * {@link RECORD} for outcomes that are all successes, the usual case, without its per-row machinery
 * (sixteen arrays, a window per target, the retry and breaker rules per row). Exists for speed:
 * Postgres CPU per event 4.9 µs lower in `actions-b50` (of ~49) and 11.7 µs in `actions-b1` (of ~70),
 * interleaved A/B on the bundle. What it does is RECORD's for a success: `succeed`, the attempt counted, the log untouched; each target answered, so a target with a
 * health row has its failure run reset and a pause for failures lifted (a success writes no new row).
 * `pair_projects` and `pair_targets` are the (project, target) pairs recorded, `projects` the events'
 * (one per id). test/fixtures/sql/record_ok.sql holds it whole, as sent.
 */
export const RECORD_OK = named<{
  ids: readonly string[]
  leases: readonly string[]
  pair_projects: readonly string[]
  pair_targets: readonly string[]
  /** Per pair: how many delivered batches its records came in (a target in a failure window counts them). */
  pair_batches: readonly number[]
  breaker_threshold: number
  breaker_rate: number
  breaker_window_ms: number
  probe_ms: number
  probe_cap_ms: number
  progress: boolean
  projects: readonly string[]
}>()(
  [
    'ids',
    'leases',
    'pair_projects',
    'pair_targets',
    'pair_batches',
    'breaker_threshold',
    'breaker_rate',
    'breaker_window_ms',
    'probe_ms',
    'probe_cap_ms',
    'progress',
    'projects',
  ],
  `WITH u AS MATERIALIZED (
    SELECT u.*, ${ROW_AT('u')} FROM unnest($ids::uuid[], $leases::timestamptz[], $projects::text[]) AS u(id, lease, project)
  ),
  ev AS (
    UPDATE actions_event e SET num_retries = e.num_retries + 1, state = 'succeed', resolved_at = now(),
      lease_until = NULL, first_failed_at = NULL, last_state_change = now()
    FROM u
    WHERE ${AT_ROWS} AND e.id = u.id AND e.project = u.project AND ${PROCESSING} AND e.lease_until = u.lease
    RETURNING e.id, e.state, e.num_retries, e.project, e.target, e.trigger, e.order_key IS NOT NULL AS keyed
  ),
  -- The targets' health rows as the statement began (grouped: an upsert may touch a row only once).
  was AS (
    SELECT h.project, h.target, h.paused_reason AS was_paused, t.batches
    FROM actions_target_health h
    JOIN (SELECT project, target, sum(batches)::int AS batches FROM unnest($pair_projects::text[], $pair_targets::text[], $pair_batches::int[]) AS t(project, target, batches)
          GROUP BY project, target) t ON h.project = t.project AND h.target = t.target
  ),
  seen AS (SELECT project, target, false AS down, false AS gone, batches, 0 AS failed_batches, true AS known, false AS held, NULL::timestamptz AS hold_until,
                  NULL::text AS misconfigured FROM was),
  ${HEALTH_UPSERT},
  ${PROGRESS_UPSERT},
  changes AS (
    SELECT c.project, c.target, c.paused_reason IS NULL AND w.was_paused IS NOT NULL AS resumed
    FROM health c JOIN was w ON w.project = c.project AND w.target = c.target
  )
  SELECT ev.id, ev.state, ev.num_retries, ev.target, ev.trigger, false AS held, ev.keyed,
         NULL::text AS target_paused, coalesce(c.resumed, false) AS target_resumed
  FROM ev LEFT JOIN changes c ON c.project = ev.project AND c.target = ev.target`,
)
/** {@link RECORD_OK}'s text (bench/profile.ts tells statements apart by it). */
export const RECORD_OK_SQL = RECORD_OK.text

/**
 * Records many attempts in one statement: success → `succeed`; failure → `retrying` at
 * initialRepeatIntervalMs · 2^(attempt − 1) later by the database clock (no earlier than a Retry-After
 * asked, up to its cap; stretched by the jitter), or `failed` once the event has had maxAttempts
 * attempts, unless its target is down (see HOLD). Every failed attempt appends its log entry. The same
 * statement keeps the targets' health (the circuit breaker, lib/db/health.ts) and, with `progress`, the
 * dispatch progress of the projects it changed rows of. Returns the rows it changed. Outcomes that are
 * all successes go through {@link RECORD_OK}, which does the same for them at less cost.
 */
export async function recordAttempts(
  db: Queryable,
  records: readonly AttemptRecord[],
  settings: RecordSettings = DEFAULT_RECORD_SETTINGS,
  { progress = false }: { progress?: boolean } = {},
): Promise<RecordedRow[]> {
  if (records.length === 0) return []
  if (records.every(r => r.outcome.ok)) {
    // One record per project and target: the statement only needs the pairs, and how many batches each came in.
    const pairs = [...new Map(records.map(r => [`${r.project}\u0000${r.target}`, r])).values()]
    const batchesOf = new Map<string, Set<number>>()
    records.forEach((r, i) => {
      const key = `${r.project}\u0000${r.target}`
      const set = batchesOf.get(key) ?? new Set<number>()
      set.add(r.batch ?? -1 - i)
      batchesOf.set(key, set)
    })
    const { rows } = await db.query<RecordedRow>({
      name: 'actions_record_ok',
      text: RECORD_OK.text,
      values: RECORD_OK.values({
        ids: records.map(r => r.id),
        leases: records.map(r => r.lease),
        pair_projects: pairs.map(r => r.project),
        pair_targets: pairs.map(r => r.target),
        pair_batches: pairs.map(r => batchesOf.get(`${r.project}\u0000${r.target}`)?.size ?? 1),
        ...breakerParams(settings),
        progress,
        projects: records.map(r => r.project),
      }),
    })
    return rows
  }
  const { rows } = await db.query<RecordedRow>({
    name: 'actions_record',
    text: RECORD.text,
    values: RECORD.values(recordParams(records, settings, progress)),
  })
  return rows
}

import type { Outcome } from '../events.js'
import { cleanText, STORED_ERROR_BYTES, STORED_RESPONSE_BYTES } from '../text.js'
import { MAX_INT32 } from '../schema/limits.js'
import { DEFAULT_RECORD_SETTINGS, HEALTH_UPSERT, healthUpsert, type RecordSettings } from './health.js'
import type { Queryable } from './pool.js'
import { arrayLiteral } from './arrays.js'
import { appendedLog, droppedAfterAppend } from './log.js'
import { failureKind } from '../kinds.js'

/** One attempt's outcome for one claimed event, with what the retry rule and the circuit breaker need. */
export type AttemptRecord = {
  id: string
  /** The claim's lease (ClaimedEvent.lease); an event re-claimed by another dispatcher since then is not touched. */
  lease: string
  /** The event's project and target: the circuit breaker keeps health per project and target. */
  project: string
  target: string
  /** The event's `num_retries` when claimed (attempts before this one). */
  attempts: number
  /** Records of one delivered batch share this number (the breaker counts failed batches); default: each its own. */
  batch?: number
  outcome: Outcome
  durationMs: number
  maxAttempts: number
  initialRepeatIntervalMs: number
  /**
   * The batch (of more than one event) failed as a whole: the largest batch the event may travel in
   * next (half of this one), so a poison event ends up alone (issue 23). Undefined otherwise.
   */
  splitTo?: number
}

/**
 * A recorded event. `held`: its last attempt failed while its target was down, so it stays `retrying`
 * (the target pauses instead). `target_paused` / `target_resumed`: this statement paused (with the
 * reason) or resumed the event's target.
 */
export type RecordedRow = {
  id: string; state: 'succeed' | 'retrying' | 'failed'; num_retries: number; target: string; trigger: string
  held: boolean; target_paused: 'failures' | 'gone' | 'misconfigured' | null; target_resumed: boolean
  /** The event has an ordering key: once it is resolved, the key's next event may be claimable. */
  keyed: boolean
}

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
const HOLD = `(${LAST} AND u.kind IN ('down', 'misconfigured') AND $16::int > 0 AND NOT u.answered AND (u.gone OR coalesce(u.run_since, now())
    <= CASE WHEN e.num_retries = 0 THEN now() ELSE coalesce(e.first_failed_at, e.created_at) END))`
/**
 * The event's batch failed as a whole and may hold a poison event: rejected, or a probe of a target
 * paused for failures. Its next attempt travels in a batch of at most `split_to` (half), and it does
 * not fail from such an answer while it still shares its batch: its last attempt is made alone.
 */
const SPLIT = `(NOT u.ok AND u.split_to IS NOT NULL AND (u.kind = 'rejected' OR (u.kind = 'down' AND u.was_paused = 'failures')))`
// A `"retry": false` answer fails its event at once; any other failure only once it was the last attempt.
// With the breaker off ($16 = 0, upstream's rule) a batch-wide failure fails its events like any other.
const TERMINAL = `((NOT u.ok AND u.kind = 'final') OR (${LAST} AND NOT ${HOLD} AND NOT (${SPLIT} AND $16::int > 0)))`
// What the receiver asked for (Retry-After as delta-seconds or an HTTP date), in ms by the database clock.
const RETRY_AFTER = `coalesce(u.retry_after_ms, extract(epoch FROM u.retry_at - now())::float8 * 1000)`
// Upstream's backoff, no earlier than the receiver asked (capped), stretched by the jitter fraction.
const DELAY_MS = `greatest(least(u.interval_ms * power(2, e.num_retries), $7::float8),
      CASE WHEN ${RETRY_AFTER} IS NOT NULL THEN least(${RETRY_AFTER}, $15::float8) END) * (1 + $19::float8 * random())`

/**
 * Dispatch progress (the sweeper's heartbeat, lib/db/progress.ts) rides in the record statements when
 * `flag` (a boolean parameter) asks: a short drain's own upsert was a statement and a commit of its
 * own. GREATEST: never moved back.
 */
const progressUpsert = (flag: string) => `progress AS (
    INSERT INTO actions_dispatch_progress (project, progressed_at)
    SELECT DISTINCT ev.project, now() FROM ev WHERE ${flag}::bool
    ON CONFLICT (project) DO UPDATE SET progressed_at = GREATEST(actions_dispatch_progress.progressed_at, excluded.progressed_at)
  )`

/**
 * $1 ids, $2 leases, $3 ok, $4 log entries, $5 maxAttempts, $6 initialRepeatIntervalMs, $7 backoff cap (ms),
 * $8 projects, $9 targets, $10 status codes, $11 batch numbers, $12 attempts before, $13 Retry-After (ms),
 * $14 Retry-After (date), $15 Retry-After cap (ms), $16 breaker threshold, $17 first probe interval (ms),
 * $18 probe interval cap (ms), $19 jitter fraction, $20 whether to write the projects' dispatch progress,
 * $21 failure kinds (lib/kinds.ts; null for a success), $22 what misconfigured the target (its
 * status or our cause), $23 the batch size to split a failed batch to (null: no split), by record.
 */
export const RECORD_SQL = `WITH u AS MATERIALIZED (
    -- Per target, what this statement saw: answered (an event delivered, or an answer that rejects
    -- events: the target works), gone (a 410), misconfigured (what it answered that needs an operator).
    SELECT r.*,
           bool_or(r.ok OR r.kind IN ('rejected', 'final')) OVER w AND NOT bool_or(coalesce(r.code = 410, false)) OVER w AS answered,
           bool_or(coalesce(r.code = 410, false)) OVER w AS gone,
           max(r.detail) OVER w AS misconfigured,
           h.failing_since AS run_since, h.paused_reason AS was_paused, h.project IS NOT NULL AS known
    FROM unnest($1::uuid[], $2::timestamptz[], $3::bool[], $4::jsonb[], $5::int[], $6::int[], $8::text[], $9::text[],
                $10::int[], $11::int[], $12::int[], $13::float8[], $14::timestamptz[], $21::text[], $22::text[], $23::int[])
         AS r(id, lease, ok, entry, max_attempts, interval_ms, project, target, code, batch, attempts, retry_after_ms, retry_at, kind, detail, split_to)
    LEFT JOIN actions_target_health h ON h.project = r.project AND h.target = r.target
    WINDOW w AS (PARTITION BY r.project, r.target)
  ),
  ev AS (
    UPDATE actions_event e SET
      -- Every attempt counts, a held one too (DESIGN §4): the hold is the state, never a frozen counter.
      num_retries = e.num_retries + 1,
      state = CASE WHEN u.ok THEN 'succeed' WHEN ${TERMINAL} THEN 'failed' ELSE 'retrying' END::actions_event_state,
      -- A held event is due at once: it waits for its target's resume, not for a backoff.
      visible_at = CASE WHEN u.ok OR ${TERMINAL} THEN e.visible_at WHEN ${HOLD} THEN now()
                        ELSE now() + ${DELAY_MS} * interval '1 millisecond' END,
      resolved_at = CASE WHEN u.ok OR ${TERMINAL} THEN now() END,
      log = CASE WHEN u.ok THEN e.log ELSE ${appendedLog('e', 'u.entry')} END,
      log_dropped = CASE WHEN u.ok THEN e.log_dropped ELSE ${droppedAfterAppend('e')} END,
      first_failed_at = CASE WHEN u.ok THEN NULL WHEN e.num_retries = 0 THEN now() ELSE coalesce(e.first_failed_at, e.created_at) END,
      batch_cap = CASE WHEN ${SPLIT} THEN least(u.split_to, coalesce(e.batch_cap, u.split_to)) WHEN u.ok THEN NULL ELSE e.batch_cap END,
      last_state_change = now()
    FROM u
    WHERE e.id = u.id AND e.project = u.project AND ${PROCESSING} AND e.visible_at = u.lease
    RETURNING e.id, e.state, e.num_retries, e.project, e.target, e.trigger, e.order_key IS NOT NULL AS keyed,
              NOT u.ok AND e.state = 'retrying' AND e.num_retries >= u.max_attempts AS held
  ),
  seen AS (
    SELECT u.project, u.target, NOT bool_or(u.answered) AS down, bool_or(u.gone) AS gone,
           count(DISTINCT u.batch)::int AS batches, bool_or(u.known) AS known, coalesce(bool_or(ev.held), false) AS held,
           max(u.misconfigured) AS misconfigured,
           -- A Retry-After holds the whole target until then (capped as the event's own delay is).
           -- (least() skips NULLs: without the CASE an outcome without Retry-After would hold for the cap.)
           max(CASE WHEN ${RETRY_AFTER} IS NOT NULL THEN now() + least(${RETRY_AFTER}, $15::float8) * interval '1 millisecond' END) AS hold_until
    FROM u LEFT JOIN ev ON ev.id = u.id AND ev.project = u.project
    GROUP BY u.project, u.target
  ),
  ${HEALTH_UPSERT},
  ${progressUpsert('$20')},
  changes AS (
    SELECT DISTINCT ON (c.project, c.target) c.project, c.target,
           CASE WHEN c.paused_reason IS NOT NULL AND u.was_paused IS DISTINCT FROM c.paused_reason THEN c.paused_reason END AS paused,
           c.paused_reason IS NULL AND u.was_paused IS NOT NULL AS resumed
    FROM health c JOIN u ON u.project = c.project AND u.target = c.target
  )
  SELECT ev.id, ev.state, ev.num_retries, ev.target, ev.trigger, ev.held, ev.keyed,
         c.paused AS target_paused, coalesce(c.resumed, false) AS target_resumed
  FROM ev LEFT JOIN changes c ON c.project = ev.project AND c.target = ev.target`

/**
 * RECORD_SQL for outcomes that are all successes, the usual case, without its per-row machinery
 * (thirteen arrays, a window per target, the retry and breaker rules per row), a quarter to a third
 * of its cost (bench/README.md, "Claim and record at 800 rows"). What it does is RECORD_SQL's for a
 * success: `succeed`, the attempt counted, the log untouched; each target answered, so a target with a
 * health row has its failure run reset and a pause for failures lifted (a success writes no new row).
 * $1 ids, $2 leases, $3 projects and $4 targets (the pairs recorded), $5 breaker threshold, $6 first
 * probe interval (ms), $7 probe interval cap (ms), $8 whether to write the projects' dispatch progress,
 * $9 the events' projects (by event, as $1).
 */
export const RECORD_OK_SQL = `WITH ev AS (
    UPDATE actions_event e SET num_retries = e.num_retries + 1, state = 'succeed', resolved_at = now(),
      first_failed_at = NULL, last_state_change = now()
    FROM unnest($1::uuid[], $2::timestamptz[], $9::text[]) AS u(id, lease, project)
    WHERE e.id = u.id AND e.project = u.project AND ${PROCESSING} AND e.visible_at = u.lease
    RETURNING e.id, e.state, e.num_retries, e.project, e.target, e.trigger, e.order_key IS NOT NULL AS keyed
  ),
  -- The targets' health rows as the statement began (DISTINCT: an upsert may touch a row only once).
  was AS (
    SELECT h.project, h.target, h.paused_reason AS was_paused
    FROM actions_target_health h
    JOIN (SELECT DISTINCT project, target FROM unnest($3::text[], $4::text[]) AS t(project, target)) t ON h.project = t.project AND h.target = t.target
  ),
  seen AS (SELECT project, target, false AS down, false AS gone, 0 AS batches, true AS known, false AS held, NULL::timestamptz AS hold_until,
                  NULL::text AS misconfigured FROM was),
  ${healthUpsert({ threshold: '$5', probe: '$6', probeCap: '$7' })},
  ${progressUpsert('$8')},
  changes AS (
    SELECT c.project, c.target, c.paused_reason IS NULL AND w.was_paused IS NOT NULL AS resumed
    FROM health c JOIN was w ON w.project = c.project AND w.target = c.target
  )
  SELECT ev.id, ev.state, ev.num_retries, ev.target, ev.trigger, false AS held, ev.keyed,
         NULL::text AS target_paused, coalesce(c.resumed, false) AS target_resumed
  FROM ev LEFT JOIN changes c ON c.project = ev.project AND c.target = ev.target`

/**
 * Records many attempts in one statement: success → `succeed`; failure → `retrying` at
 * initialRepeatIntervalMs · 2^(attempt − 1) later by the database clock (no earlier than a Retry-After
 * asked, up to its cap; stretched by the jitter), or `failed` once the event has had maxAttempts
 * attempts, unless its target is down (see HOLD). Every failed attempt appends its log entry. The same
 * statement keeps the targets' health (the circuit breaker, lib/db/health.ts) and, with `progress`, the
 * dispatch progress of the projects it changed rows of. Returns the rows it changed. Outcomes that are
 * all successes go through {@link RECORD_OK_SQL}, which does the same for them at less cost.
 */
export async function recordAttempts(db: Queryable, records: readonly AttemptRecord[], settings: RecordSettings = DEFAULT_RECORD_SETTINGS, { progress = false }: { progress?: boolean } = {}): Promise<RecordedRow[]> {
  if (records.length === 0) return []
  if (records.every(r => r.outcome.ok)) {
    // One record per project and target: the statement only needs the pairs.
    const pairs = [...new Map(records.map(r => [`${r.project}\u0000${r.target}`, r])).values()]
    const { rows } = await db.query<RecordedRow>({
      name: 'actions_record_ok',
      text: RECORD_OK_SQL,
      values: [
        arrayLiteral(records.map(r => r.id)), arrayLiteral(records.map(r => r.lease)),
        arrayLiteral(pairs.map(r => r.project)), arrayLiteral(pairs.map(r => r.target)),
        clampInt(settings.breakerFailures, 0), clampInt(settings.probeMs, 1), clampInt(settings.probeMaxMs, 1), progress,
        arrayLiteral(records.map(r => r.project)),
      ],
    })
    return rows
  }
  const retryAfter = records.map(r => (r.outcome.ok ? undefined : r.outcome.retryAfter))
  const { rows } = await db.query<RecordedRow>({
    name: 'actions_record',
    text: RECORD_SQL,
    // Array parameters as literals built here (lib/db/arrays.ts): node-postgres' own conversion was the
    // dearest part of preparing this statement.
    values: [
      arrayLiteral(records.map(r => r.id)),
      arrayLiteral(records.map(r => r.lease)),
      arrayLiteral(records.map(r => r.outcome.ok)),
      arrayLiteral(records.map(r => (r.outcome.ok ? null : JSON.stringify(logEntry(r.outcome, r.durationMs))))),
      // Clamped into the columns' int range: a stored schema from before the limits must not make the
      // statement fail (and the attempt go uncounted) on a cast.
      arrayLiteral(records.map(r => clampInt(r.maxAttempts, 1))),
      arrayLiteral(records.map(r => clampInt(r.initialRepeatIntervalMs, 0))),
      MAX_BACKOFF_MS,
      arrayLiteral(records.map(r => r.project)),
      arrayLiteral(records.map(r => r.target)),
      arrayLiteral(records.map(r => r.outcome.code ?? null)),
      arrayLiteral(records.map((r, i) => r.batch ?? -1 - i)),
      arrayLiteral(records.map(r => r.attempts)),
      arrayLiteral(retryAfter.map(ra => (ra && 'delayMs' in ra ? ra.delayMs : null))),
      arrayLiteral(retryAfter.map(ra => (ra && 'at' in ra ? ra.at : null))),
      settings.retryAfterMaxMs,
      clampInt(settings.breakerFailures, 0),
      clampInt(settings.probeMs, 1),
      clampInt(settings.probeMaxMs, 1),
      Math.min(1, Math.max(0, settings.jitter)),
      progress,
      arrayLiteral(records.map(r => (r.outcome.ok ? null : failureKind(r.outcome)))),
      arrayLiteral(records.map(r => misconfiguredBy(r.outcome))),
      arrayLiteral(records.map(r => r.splitTo ?? null)),
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

/** What misconfigured the target, for its pause (`401`, `Destination not allowed`): a status, or our own words for a request never made. */
function misconfiguredBy(outcome: Outcome): string | null {
  if (outcome.ok || failureKind(outcome) !== 'misconfigured') return null
  return outcome.code !== undefined ? String(outcome.code) : cleanText(outcome.errorMessage, MISCONFIGURED_DETAIL_BYTES)
}

/** The longest pause detail kept: our own error words are short; a variable name may be long. */
const MISCONFIGURED_DETAIL_BYTES = 300

function clampInt(value: number, min: number): number {
  return Number.isFinite(value) ? Math.min(MAX_INT32, Math.max(min, Math.trunc(value))) : min
}

/**
 * The last resort of a record the database refused for its data (lib/dispatch/recorder.ts): the event
 * row alone, no health, no progress, no receiver text, so nothing a receiver or a stored schema holds
 * can make it fail. The attempt counts and the entry says why it is bare. $1 id, $2 lease, $3 project,
 * $4 delivered, $5 status code, $6 maxAttempts, $7 initialRepeatIntervalMs, $8 backoff cap (ms), $9 the entry's text,
 * $10 the attempt's duration (ms).
 */
export const RECORD_MINIMAL_SQL = `UPDATE actions_event e SET
    num_retries = e.num_retries + 1,
    state = CASE WHEN $4::bool THEN 'succeed' WHEN e.num_retries + 1 >= $6::int THEN 'failed' ELSE 'retrying' END::actions_event_state,
    visible_at = CASE WHEN $4::bool OR e.num_retries + 1 >= $6::int THEN e.visible_at
                      ELSE now() + least($7::int * power(2, e.num_retries), $8::float8) * interval '1 millisecond' END,
    resolved_at = CASE WHEN $4::bool OR e.num_retries + 1 >= $6::int THEN now() END,
    log = CASE WHEN $4::bool THEN e.log
               ELSE ${appendedLog('e', `jsonb_strip_nulls(jsonb_build_object('ok', false, 'code', $5::int, 'errorMessage', $9::text, 'durationMs', $10::int))`)} END,
    log_dropped = CASE WHEN $4::bool THEN e.log_dropped ELSE ${droppedAfterAppend('e')} END,
    first_failed_at = CASE WHEN $4::bool THEN NULL ELSE coalesce(e.first_failed_at, now()) END,
    last_state_change = now()
  WHERE e.id = $1 AND e.project = $3 AND ${PROCESSING} AND e.visible_at = $2::timestamptz
  RETURNING e.id, e.state, e.num_retries, e.target, e.trigger, false AS held, NULL::text AS target_paused, false AS target_resumed,
            e.order_key IS NOT NULL AS keyed`

/** Records one attempt by {@link RECORD_MINIMAL_SQL}, with `errorMessage` (ours, never receiver text) as its entry. */
export async function recordMinimal(db: Queryable, r: AttemptRecord, errorMessage: string): Promise<RecordedRow[]> {
  const { rows } = await db.query<RecordedRow>(RECORD_MINIMAL_SQL, [
    r.id, r.lease, r.project, r.outcome.ok, r.outcome.code ?? null,
    clampInt(r.maxAttempts, 1), clampInt(r.initialRepeatIntervalMs, 0), MAX_BACKOFF_MS, errorMessage, clampInt(r.durationMs, 0),
  ])
  return rows
}

/**
 * $1 ids, $2 leases, $3 project. A released event goes back to the state it was claimed from (created
 * if never attempted, else retrying): `processing` with its time come means an attempt that was never
 * recorded, and the claim counts those (lib/db/claim.ts).
 */
export const RELEASE_SQL = `UPDATE actions_event e SET visible_at = now(),
    state = CASE WHEN e.num_retries = 0 THEN 'created' ELSE 'retrying' END::actions_event_state
  FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, lease)
  WHERE e.id = u.id AND e.project = $3 AND ${PROCESSING} AND e.visible_at = u.lease`

/**
 * Hands claimed events of a project back without an attempt (a drain stopping for time, or a lease too
 * close to its end to start a delivery): they become due now, their attempt count untouched. Fenced by lease.
 */
export async function releaseClaims(db: Queryable, project: string, claims: ReadonlyArray<{ id: string; lease: string }>): Promise<number> {
  if (claims.length === 0) return 0
  const { rowCount } = await db.query(
    RELEASE_SQL,
    [arrayLiteral(claims.map(c => c.id)), arrayLiteral(claims.map(c => c.lease)), project],
  )
  return rowCount ?? 0
}

import type { Queryable } from './pool.js'

/**
 * The circuit breaker's knobs (config BREAKER_*, RETRY_AFTER_MAX_MS, RETRY_JITTER), passed to the
 * record statement: the database applies them, so its clock stays the only clock.
 */
export type RecordSettings = {
  /** Failed batches in a row (no event delivered, no 2xx) that pause a target; 0 turns the breaker off. */
  breakerFailures: number
  /** The share of the target's batches in its window that must have failed too, for those in a row to pause it (0 < rate ≤ 1). */
  breakerRate: number
  /** The window's length: batches recorded longer ago than about this count less, and after twice this not at all. */
  breakerWindowMs: number
  /** First probe interval of a paused target; doubles after each failed probe. */
  probeMs: number
  /** Cap of the probe interval. */
  probeMaxMs: number
  /** Longest delay a receiver's Retry-After can impose on an event. */
  retryAfterMaxMs: number
  /** Retry delays are stretched by up to this fraction at random (0 keeps upstream's exact timing). */
  jitter: number
}

/** The defaults, which config mirrors. */
export const DEFAULT_RECORD_SETTINGS: RecordSettings = {
  breakerFailures: 5,
  // A receiver answering three requests in four fails a quarter of its batches: far below. A dead one
  // fails them all, so it pauses after its first BREAKER_FAILURES batches, as it always did.
  breakerRate: 0.9,
  breakerWindowMs: 60_000,
  probeMs: 30_000,
  probeMaxMs: 15 * 60_000,
  retryAfterMaxMs: 60 * 60_000,
  jitter: 0,
}

/**
 * The target's failure window after this statement (migration 020): two buckets of `$breaker_window_ms`,
 * the current one (since `window_at`) and the one before it. A statement a window or more after
 * `window_at` starts a new bucket, and the current one becomes the one before (or is forgotten, two
 * windows on). `excluded` carries this statement's batches and failed batches.
 */
const ROLLED = `(h.window_at IS NULL OR h.window_at + $breaker_window_ms::int * interval '1 millisecond' <= now())`
const KEPT = `(h.window_at + 2 * $breaker_window_ms::int * interval '1 millisecond' > now())`
const WINDOW_AT = `CASE WHEN ${ROLLED} THEN now() ELSE h.window_at END`
const CUR_BATCHES = `(CASE WHEN ${ROLLED} THEN 0 ELSE h.window_batches END + excluded.window_batches)`
const CUR_FAILED = `(CASE WHEN ${ROLLED} THEN 0 ELSE h.window_failed END + excluded.window_failed)`
const PREV_BATCHES = `CASE WHEN NOT ${ROLLED} THEN h.prev_batches WHEN ${KEPT} THEN h.window_batches ELSE 0 END`
const PREV_FAILED = `CASE WHEN NOT ${ROLLED} THEN h.prev_failed WHEN ${KEPT} THEN h.window_failed ELSE 0 END`
// The bucket before counts less as the current one ages: fully at its start, not at all a window on.
const PREV_WEIGHT = `(CASE WHEN ${ROLLED} THEN 1 ELSE greatest(0, 1 - extract(epoch FROM now() - h.window_at) * 1000 / $breaker_window_ms::int) END)`
/** Enough of the window's batches failed: a flaky target, failing now and then, stays far below. */
const RATE_REACHED = `((${PREV_FAILED}) * ${PREV_WEIGHT} + ${CUR_FAILED} >= $breaker_rate::float8 * ((${PREV_BATCHES}) * ${PREV_WEIGHT} + ${CUR_BATCHES}))`

/**
 * How the recorded attempts move a target's health (in the record statement; `excluded` is what this
 * statement saw of the target, `h` its row as it is now):
 * - `resume`: it answered (an event delivered or a 2xx) while paused for failures;
 * - `gone`: it answered 410 (paused with no probe, for an operator);
 * - `backoff`: it failed while paused for failures after a probe was claimed (a failed probe: the
 *   interval doubles, once per probe); a failure of a batch sent before the pause changes nothing;
 * - `pause`: it failed, its failed batches in a row reached the threshold and its window's failure
 *   rate reached `$breaker_rate` (so a flaky target is not paused, a dead one is, after the same
 *   number of batches as a run alone took); or an event would otherwise have failed terminally (the
 *   hold: this statement's failures are fewer than the threshold then, and the event's own rule
 *   already asked for the rate);
 * - `misconfigure`: as `pause`, but what it answered needs an operator (`pause_detail`: a 401, a
 *   redirect, the egress guard's refusal): paused with no probe; also when a paused target's probe
 *   answers so;
 * - `keep`: nothing changes in the pause (operator pauses are left to operators).
 */
const MODE = `(CASE
    WHEN excluded.failing_since IS NULL THEN CASE WHEN h.paused_reason = 'failures' THEN 'resume' ELSE 'keep' END
    WHEN $breaker_threshold::int = 0 THEN CASE WHEN h.paused_reason = 'failures' THEN 'backoff' ELSE 'keep' END
    WHEN excluded.paused_reason = 'gone' THEN CASE WHEN h.paused_reason = 'gone' THEN 'keep' ELSE 'gone' END
    WHEN h.paused_reason = 'failures' AND excluded.pause_detail IS NOT NULL AND h.probe_claimed_at >= h.paused_at THEN 'misconfigure'
    WHEN h.paused_reason = 'failures' AND h.probe_claimed_at >= h.paused_at THEN 'backoff'
    WHEN h.paused_reason IS NOT NULL THEN 'keep'
    WHEN (excluded.paused_reason IS NOT NULL AND excluded.consecutive_failures < $breaker_threshold::int)
      OR (h.consecutive_failures + excluded.consecutive_failures >= $breaker_threshold::int AND ${RATE_REACHED})
      THEN CASE WHEN excluded.pause_detail IS NOT NULL THEN 'misconfigure' ELSE 'pause' END
    ELSE 'keep' END)`

// A failed probe doubles the interval, up to the cap.
const DOUBLED = `least(coalesce(h.probe_interval_ms, $probe_ms::int)::bigint * 2, $probe_cap_ms::int)::int`

/**
 * A record statement's health upsert over `seen` (per project and target: down, gone, batches and
 * failed batches, held, known, `hold_until`: when a Retry-After asked the target to be left alone
 * until, and `misconfigured`: what it answered that needs an operator). A target with no row writes
 * one only when something failed, so a target that never failed costs its record nothing here; once
 * it has a row, every record of it counts its batches in the window (one small row rewritten per
 * statement and target), so its failure rate is known when failures come. A failure run starts at the earliest failure
 * recorded (least()), so a statement that commits late cannot start the run after an event's own
 * first failure. Its parameters are named alike in both record statements: `$breaker_threshold`,
 * `$breaker_rate`, `$breaker_window_ms`, `$probe_ms` (the first probe interval) and `$probe_cap_ms`
 * (the interval's cap).
 */
export const HEALTH_UPSERT = `health AS (
    INSERT INTO actions_target_health AS h
      (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms, hold_until, pause_detail,
       window_at, window_batches, window_failed, updated_at)
    SELECT project, target, CASE WHEN down THEN batches ELSE 0 END, CASE WHEN down THEN now() END,
           CASE WHEN pause IS NOT NULL THEN now() END, pause,
           CASE WHEN pause = 'failures' THEN now() + $probe_ms::int * interval '1 millisecond' END,
           CASE WHEN pause = 'failures' THEN $probe_ms::int END, hold_until, CASE WHEN down THEN misconfigured END,
           now(), batches, failed_batches, now()
    -- A new row's window is this statement alone: when it is down, every batch in it failed.
    FROM (SELECT *, CASE WHEN $breaker_threshold::int = 0 THEN NULL WHEN gone THEN 'gone'
                         WHEN down AND (held OR batches >= $breaker_threshold::int) THEN CASE WHEN misconfigured IS NOT NULL THEN 'misconfigured' ELSE 'failures' END
                    END AS pause FROM seen) s
    WHERE down OR known OR hold_until IS NOT NULL OR failed_batches > 0
    ON CONFLICT (project, target) DO UPDATE SET
      -- The latest time any receiver answer asked for; a success does not lift it (it asked for time, not health).
      hold_until = CASE WHEN excluded.hold_until > coalesce(h.hold_until, '-infinity') THEN excluded.hold_until ELSE h.hold_until END,
      consecutive_failures = CASE WHEN excluded.failing_since IS NULL THEN 0 ELSE h.consecutive_failures + excluded.consecutive_failures END,
      failing_since = CASE WHEN excluded.failing_since IS NULL THEN NULL ELSE least(h.failing_since, now()) END,
      paused_at = CASE ${MODE} WHEN 'resume' THEN NULL WHEN 'gone' THEN now() WHEN 'pause' THEN now() WHEN 'misconfigure' THEN coalesce(h.paused_at, now()) ELSE h.paused_at END,
      paused_reason = CASE ${MODE} WHEN 'resume' THEN NULL WHEN 'gone' THEN 'gone' WHEN 'pause' THEN 'failures' WHEN 'misconfigure' THEN 'misconfigured' ELSE h.paused_reason END,
      pause_detail = CASE ${MODE} WHEN 'resume' THEN NULL WHEN 'gone' THEN '410' WHEN 'pause' THEN NULL WHEN 'misconfigure' THEN excluded.pause_detail ELSE h.pause_detail END,
      probe_at = CASE ${MODE} WHEN 'resume' THEN NULL WHEN 'gone' THEN NULL WHEN 'misconfigure' THEN NULL
                 WHEN 'pause' THEN now() + $probe_ms::int * interval '1 millisecond'
                 WHEN 'backoff' THEN now() + ${DOUBLED} * interval '1 millisecond' ELSE h.probe_at END,
      probe_interval_ms = CASE ${MODE} WHEN 'resume' THEN NULL WHEN 'gone' THEN NULL WHEN 'misconfigure' THEN NULL WHEN 'pause' THEN $probe_ms::int
                          WHEN 'backoff' THEN ${DOUBLED} ELSE h.probe_interval_ms END,
      probe_claimed_at = CASE ${MODE} WHEN 'keep' THEN h.probe_claimed_at ELSE NULL END,
      window_at = ${WINDOW_AT},
      window_batches = ${CUR_BATCHES},
      window_failed = ${CUR_FAILED},
      prev_batches = ${PREV_BATCHES},
      prev_failed = ${PREV_FAILED},
      updated_at = now()
    WHERE excluded.failing_since IS NOT NULL OR h.consecutive_failures > 0 OR h.paused_reason = 'failures' OR excluded.hold_until IS NOT NULL
       OR excluded.window_batches > 0
    RETURNING h.project, h.target, h.paused_reason
  )`

/** A target's health row, as tests and operators read it. */
export type TargetHealth = {
  project: string
  target: string
  consecutive_failures: number
  failing_since: Date | null
  paused_at: Date | null
  paused_reason: 'failures' | 'gone' | 'operator' | 'misconfigured' | null
  probe_at: Date | null
  probe_interval_ms: number | null
  pause_detail: string | null
}

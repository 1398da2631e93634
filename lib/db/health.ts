import type { Queryable } from './pool.js'

/**
 * The circuit breaker's knobs (config BREAKER_*, RETRY_AFTER_MAX_MS, RETRY_JITTER), passed to the
 * record statement: the database applies them, so its clock stays the only clock.
 */
export type RecordSettings = {
  /** Failed batches in a row (no event delivered, no 2xx) that pause a target; 0 turns the breaker off. */
  breakerFailures: number
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
  probeMs: 30_000,
  probeMaxMs: 15 * 60_000,
  retryAfterMaxMs: 60 * 60_000,
  jitter: 0,
}

/**
 * How the recorded attempts move a target's health (in the record statement; `excluded` is what this
 * statement saw of the target, `h` its row as it is now):
 * - `resume`: it answered (an event delivered or a 2xx) while paused for failures;
 * - `gone`: it answered 410 (paused with no probe, for an operator);
 * - `backoff`: it failed while paused for failures after a probe was claimed (a failed probe: the
 *   interval doubles, once per probe); a failure of a batch sent before the pause changes nothing;
 * - `pause`: it failed and crossed the threshold, or an event would otherwise have failed terminally;
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
    WHEN excluded.paused_reason IS NOT NULL OR h.consecutive_failures + excluded.consecutive_failures >= $breaker_threshold::int
      THEN CASE WHEN excluded.pause_detail IS NOT NULL THEN 'misconfigure' ELSE 'pause' END
    ELSE 'keep' END)`

// A failed probe doubles the interval, up to the cap.
const DOUBLED = `least(coalesce(h.probe_interval_ms, $probe_ms::int)::bigint * 2, $probe_cap_ms::int)::int`

/**
 * A record statement's health upsert over `seen` (per project and target: down, gone, failed
 * batches, held, known, `hold_until`: when a Retry-After asked the target to be left alone until, and
 * `misconfigured`: what it answered that needs an operator). A target with no row that answered writes nothing; a healthy row is not
 * rewritten by a success. A failure run starts at the earliest failure recorded (least()), so a
 * statement that commits late cannot start the run after an event's own first failure. Its parameters
 * are named alike in both record statements: `$breaker_threshold`, `$probe_ms` (the first probe
 * interval) and `$probe_cap_ms` (the interval's cap).
 */
export const HEALTH_UPSERT = `health AS (
    INSERT INTO actions_target_health AS h
      (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms, hold_until, pause_detail, updated_at)
    SELECT project, target, CASE WHEN down THEN batches ELSE 0 END, CASE WHEN down THEN now() END,
           CASE WHEN pause IS NOT NULL THEN now() END, pause,
           CASE WHEN pause = 'failures' THEN now() + $probe_ms::int * interval '1 millisecond' END,
           CASE WHEN pause = 'failures' THEN $probe_ms::int END, hold_until, CASE WHEN down THEN misconfigured END, now()
    FROM (SELECT *, CASE WHEN $breaker_threshold::int = 0 THEN NULL WHEN gone THEN 'gone'
                         WHEN down AND (held OR batches >= $breaker_threshold::int) THEN CASE WHEN misconfigured IS NOT NULL THEN 'misconfigured' ELSE 'failures' END
                    END AS pause FROM seen) s
    WHERE down OR known OR hold_until IS NOT NULL
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
      updated_at = now()
    WHERE excluded.failing_since IS NOT NULL OR h.consecutive_failures > 0 OR h.paused_reason = 'failures' OR excluded.hold_until IS NOT NULL
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

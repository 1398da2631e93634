import type { Outcome } from '../events.js'
import { failureKind } from '../kinds.js'
import { MAX_INT32 } from '../schema/limits.js'
import { cleanText, STORED_ERROR_BYTES, STORED_RESPONSE_BYTES } from '../text.js'
import type { RecordSettings } from './health.js'
import type { AttemptRecord, RecordParams } from './record-types.js'

// The record statements' parameters (lib/db/record.ts), built from the attempts' records: every value
// bounded and made storable here, so no record or stored schema can make a statement fail on a cast.

// Caps the backoff at about 100 years, so a large maxAttempts cannot overflow the interval type.
export const MAX_BACKOFF_MS = 3.15e12

/** The breaker's settings as both record statements take them, clamped into the int columns. */
export const breakerParams = (settings: RecordSettings) => ({
  breaker_threshold: clampInt(settings.breakerFailures, 0),
  // A rate above 1 could never be reached (the breaker would be off without saying so); below 0 always is.
  breaker_rate: Number.isFinite(settings.breakerRate) ? Math.min(1, Math.max(0, settings.breakerRate)) : 1,
  breaker_window_ms: clampInt(settings.breakerWindowMs, 1),
  probe_ms: clampInt(settings.probeMs, 1),
  probe_cap_ms: clampInt(settings.probeMaxMs, 1),
})

/** {@link RECORD}'s parameters. */
export function recordParams(records: readonly AttemptRecord[], settings: RecordSettings, progress: boolean): RecordParams {
  const retryAfter = records.map(r => (r.outcome.ok ? undefined : r.outcome.retryAfter))
  return {
    ids: records.map(r => r.id),
    leases: records.map(r => r.lease),
    ok: records.map(r => r.outcome.ok),
    entries: records.map(r => (r.outcome.ok ? null : JSON.stringify(logEntry(r.outcome, r.durationMs)))),
    // Clamped into the columns' int range: a stored schema from before the limits must not make the
    // statement fail (and the attempt go uncounted) on a cast.
    max_attempts: records.map(r => clampInt(r.maxAttempts, 1)),
    interval_ms: records.map(r => clampInt(r.initialRepeatIntervalMs, 0)),
    backoff_cap_ms: MAX_BACKOFF_MS,
    projects: records.map(r => r.project),
    targets: records.map(r => r.target),
    codes: records.map(r => r.outcome.code ?? null),
    batches: records.map((r, i) => r.batch ?? -1 - i),
    attempts: records.map(r => r.attempts),
    retry_after_ms: retryAfter.map(ra => (ra && 'delayMs' in ra ? ra.delayMs : null)),
    retry_at: retryAfter.map(ra => (ra && 'at' in ra ? ra.at : null)),
    retry_after_cap_ms: settings.retryAfterMaxMs,
    ...breakerParams(settings),
    jitter: Math.min(1, Math.max(0, settings.jitter)),
    progress,
    kinds: records.map(r => (r.outcome.ok ? null : failureKind(r.outcome))),
    details: records.map(r => misconfiguredBy(r.outcome)),
    split_to: records.map(r => r.splitTo ?? null),
  }
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

/** `value` as an int within [min, MAX_INT32]; `min` for NaN. */
export function clampInt(value: number, min: number): number {
  return Number.isFinite(value) ? Math.min(MAX_INT32, Math.max(min, Math.trunc(value))) : min
}

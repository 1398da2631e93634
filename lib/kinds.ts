// Shared by the store (lib/db) and delivery (lib/delivery), like lib/events.ts: neither imports the other.
import type { FailureKind, Outcome } from './events.js'

// The three kinds of failed attempt (docs/concepts.md, target health), decided here and nowhere
// else. Upstream retries every failure alike; EventBridge retries only 429 and 5xx. A target that
// answers 401 or redirects is not down: probing it forever hides the problem, and failing its events
// one by one would lose them to a configuration mistake, so it waits for an operator.

/** Statuses that say the target is down or overloaded: the breaker counts them. */
const DOWN_STATUSES = new Set([408, 429])
/** Statuses that say the target is set up wrong (URL, credentials, method): an operator must act. */
const MISCONFIGURED_STATUSES = new Set([401, 403, 404, 405, 407, 410])

/** The kind of a failed HTTP answer by its status: 5xx, 408, 429 down; 3xx and the set above misconfigured; any other 4xx (and a failed 2xx) rejected. */
export function statusKind(status: number): FailureKind {
  if (status >= 500 || DOWN_STATUSES.has(status)) return 'down'
  if ((status >= 300 && status < 400) || MISCONFIGURED_STATUSES.has(status)) return 'misconfigured'
  return 'rejected'
}

/** Network error codes of a certificate that does not verify: the URL or the receiver's TLS is wrong, not down. */
const TLS_CERT_CODES = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_UNTRUSTED',
  'CERT_REVOKED',
])

/**
 * The egress guard's refusal (lib/delivery/egress.ts, DESTINATION_NOT_ALLOWED_CODE; a test keeps the
 * two equal): no request was made, the URL points where it may not.
 */
export const EGRESS_REFUSED_CODE = 'ERR_DESTINATION_NOT_ALLOWED'

/**
 * The kind of a request that failed without an HTTP answer: the egress guard's refusal and a
 * certificate that does not verify are misconfigured, anything else (refused, reset, timeout) down.
 */
export function networkKind(code: string | undefined): FailureKind {
  return code !== undefined && (code === EGRESS_REFUSED_CODE || TLS_CERT_CODES.has(code)) ? 'misconfigured' : 'down'
}

/**
 * The kind of a failed outcome: its own when delivery set one, else by its status (a failure with
 * neither, from a caller that predates kinds, counts as down, as every failure did before).
 */
export function failureKind(outcome: Extract<Outcome, { ok: false }>): FailureKind {
  return outcome.kind ?? (outcome.code === undefined ? 'down' : statusKind(outcome.code))
}

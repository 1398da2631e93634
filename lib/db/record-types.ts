// The record's shapes: what dispatch hands the record statements and what they answer. Apart from
// lib/db/record.ts so that the value builders (record-values.ts, record-minimal.ts) need no statement.
import type { Outcome } from '../events.js'

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
   * next (half of this one), so a poison event ends up alone. Undefined otherwise.
   */
  splitTo?: number
}

/**
 * A recorded event. `held`: its last attempt failed while its target was down, so it stays `retrying`
 * (the target pauses instead). `target_paused` / `target_resumed`: this statement paused (with the
 * reason) or resumed the event's target.
 */
export type RecordedRow = {
  id: string
  state: 'succeed' | 'retrying' | 'failed'
  num_retries: number
  target: string
  trigger: string
  held: boolean
  target_paused: 'failures' | 'gone' | 'misconfigured' | null
  target_resumed: boolean
  /** The event has an ordering key: once it is resolved, the key's next event may be claimable. */
  keyed: boolean
}

/** The general record's parameters: the arrays hold one element per record, in the same order. */
export type RecordParams = {
  ids: readonly string[]
  leases: readonly string[]
  ok: readonly boolean[]
  /** Log entries (JSON text; null for a success). */
  entries: readonly (string | null)[]
  max_attempts: readonly number[]
  interval_ms: readonly number[]
  backoff_cap_ms: number
  projects: readonly string[]
  targets: readonly string[]
  /** Status codes, batch numbers (shared by a delivered batch's records), attempts before this one. */
  codes: readonly (number | null)[]
  batches: readonly number[]
  attempts: readonly number[]
  /** What a Retry-After asked: a delay (ms) or a time. */
  retry_after_ms: readonly (number | null)[]
  retry_at: readonly (Date | null)[]
  retry_after_cap_ms: number
  breaker_threshold: number
  breaker_rate: number
  breaker_window_ms: number
  probe_ms: number
  probe_cap_ms: number
  /** Retry delays are stretched by up to this fraction at random. */
  jitter: number
  /** Whether to write the projects' dispatch progress. */
  progress: boolean
  /** Failure kinds (lib/kinds.ts; null for a success), what misconfigured the target, the batch size to split to. */
  kinds: readonly (string | null)[]
  details: readonly (string | null)[]
  split_to: readonly (number | null)[]
}

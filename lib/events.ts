// The event types the store (lib/db) and delivery (lib/delivery) share. Both import them from here,
// so neither has to import the other.

export type EventState = 'created' | 'retrying' | 'processing' | 'succeed' | 'failed' | 'stopped'

/** A row of `actions_event` as the operator commands read it, its attempt log included. */
export type EventRow = {
  id: string
  project: string
  transaction_id: string
  created_at: Date
  resolved_at: Date | null
  visible_at: Date
  num_retries: number
  state: EventState
  last_state_change: Date
  stage: string | null
  schema_version: number
  target: string
  trigger: string
  priority: number
  payload: Record<string, unknown>
  log: unknown[]
  /** Log entries dropped between the first and the last 20 (migration 010). */
  log_dropped: number
  identity_id: string | null
  ip_address: string | null
  user_agent: string | null
}

/**
 * An event as the claim returns it: what its wire `meta` holds, its lease, and the payload as Postgres
 * stores it (`jsonb` text, never parsed on the way: lib/delivery/template.ts splices it into the body).
 * No attempt log: it can be large and delivery never reads it.
 */
export type ClaimedEvent = Pick<
  EventRow,
  'id' | 'transaction_id' | 'num_retries' | 'target' | 'trigger' | 'identity_id' | 'ip_address' | 'user_agent'
> & {
  /**
   * The `lease_until` the claim set, as Postgres writes a timestamptz: the lease, the fencing token of
   * the event's record. It goes back as text and compares exact (the text holds every microsecond), so
   * it is never parsed into a Date on the way.
   */
  lease: string
  /** ISO 8601 UTC with milliseconds, as JSON.stringify writes a Date. */
  created_at: string
  last_state_change: string
  /** The payload's `jsonb` text form (`{"a": 1, "b": [2, 3]}`). */
  payload: string
  /** The W3C context the event was enqueued in (migration 015), while tracing was on; the webhook span links to it. */
  traceparent?: string | null
  tracestate?: string | null
}

/**
 * What kind of trouble a failed attempt was (lib/kinds.ts): the target is `down` (the circuit
 * breaker counts it), `misconfigured` (an operator must fix the target: after the breaker's threshold
 * it pauses with no probe), or it `rejected` this event (counts toward the event's own maxAttempts
 * only); `final`: rejected with `"retry": false`, the event fails at once.
 */
export type FailureKind = 'down' | 'misconfigured' | 'rejected' | 'final'

/** What one attempt did to one event; a failed one is appended to the event's log. */
export type Outcome =
  | { ok: true; code: number }
  | {
      ok: false
      code?: number
      errorMessage: string
      response?: string
      retryAfter?: RetryAfter
      kind?: FailureKind
      /** One answer (or one failure to get one) failed every event of the batch alike: the batch may hold a poison event. */
      wholeBatch?: true
    }

/** When a receiver asked to be retried (`Retry-After`): after a delay, or at a time (judged by the database clock). */
export type RetryAfter = { delayMs: number } | { at: Date }

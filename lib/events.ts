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
  identity_id: string | null
  ip_address: string | null
  user_agent: string | null
}

/**
 * An event as the claim returns it: everything a delivery needs, without the attempt log (which can
 * be large and which delivery never reads). Its `visible_at` is its lease, the fencing token of its record.
 */
export type ClaimedEvent = Omit<EventRow, 'log'>

/** What one attempt did to one event; a failed one is appended to the event's log. */
export type Outcome =
  | { ok: true; code: number }
  | { ok: false; code?: number; errorMessage: string; response?: string }

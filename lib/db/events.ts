import type { Queryable } from './pool.js'

export type NewEventsContext = {
  project: string
  transactionId: string
  stage: string | null
  schemaVersion: number
  identityId: string | null
  ipAddress: string | null
  userAgent: string | null
  /** The enqueue span's W3C context (migration 015), written only while tracing is on. */
  trace?: { traceparent: string; tracestate: string | null } | undefined
}

/** One event to write whose payload is already serialized (enqueue measured it). */
export type SerializedEvent = {
  id: string
  trigger: string
  target: string
  priority: number
  payloadJson: string
  /** The ordering key (migration 006): a hash of the payload's entity and id, or null when the target does not order. */
  orderKey?: string | null
}

/**
 * $1..$7 the request's fields, $8..$13 the events' ids, triggers, targets, priorities, payloads and
 * ordering keys.
 * Ids are the project's own (the key is (id, project)): an id the project already has is skipped, a
 * retried request writing nothing twice. `seq` (migration 005) numbers the events in the request's
 * order: the claim breaks a tie of due times by it, so one request's events leave in the order the
 * producer sent them. nextval is evaluated after the ORDER BY, row by row in that order.
 */
export const INSERT_EVENTS_SQL = insertEventsSql(false)

/**
 * The same insert with the request's trace context as $14 and $15, for enqueues made while tracing is
 * on: with tracing off the statement sent is {@link INSERT_EVENTS_SQL}, byte for byte as before.
 */
export const INSERT_TRACED_EVENTS_SQL = insertEventsSql(true)

function insertEventsSql(traced: boolean): string {
  return `INSERT INTO actions_event (id, project, transaction_id, stage, schema_version, identity_id, ip_address, user_agent,
                              trigger, target, priority, payload, order_key, seq${traced ? ', traceparent, tracestate' : ''})
  SELECT e.id, $1, $2, $3, $4, $5, $6, $7, e.trigger, e.target, e.priority, e.payload, e.order_key, nextval('actions_event_seq')${traced ? ', $14, $15' : ''}
  FROM unnest($8::uuid[], $9::text[], $10::text[], $11::int[], $12::jsonb[], $13::uuid[])
       WITH ORDINALITY AS e(id, trigger, target, priority, payload, order_key, ord)
  ORDER BY e.ord
  ON CONFLICT (id, project) DO NOTHING
  RETURNING id`
}

/** Writes the events in one statement, in their order, skipping ids the project already has; returns the ids actually inserted now. */
export async function insertNewEvents(db: Queryable, ctx: NewEventsContext, events: SerializedEvent[]): Promise<string[]> {
  if (events.length === 0) return []
  const { rows } = await db.query<{ id: string }>({
    // Prepared once per connection: planning it cost as much as running it, once per enqueue request.
    name: ctx.trace ? 'actions_enqueue_traced' : 'actions_enqueue',
    text: ctx.trace ? INSERT_TRACED_EVENTS_SQL : INSERT_EVENTS_SQL,
    values: [
      ctx.project,
      ctx.transactionId,
      ctx.stage,
      ctx.schemaVersion,
      ctx.identityId,
      ctx.ipAddress,
      ctx.userAgent,
      events.map(e => e.id),
      events.map(e => e.trigger),
      events.map(e => e.target),
      events.map(e => e.priority),
      events.map(e => e.payloadJson),
      events.map(e => e.orderKey ?? null),
      ...(ctx.trace ? [ctx.trace.traceparent, ctx.trace.tracestate] : []),
    ],
  })
  return rows.map(r => r.id)
}

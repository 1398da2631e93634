import type { Queryable } from './pool.js'
import { named } from './sql.js'

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

/** The insert's parameters: the request's fields, then one array element per event, in the request's order. */
type InsertParams = {
  project: string
  transaction_id: string
  stage: string | null
  schema_version: number
  identity_id: string | null
  ip_address: string | null
  user_agent: string | null
  ids: readonly string[]
  triggers: readonly string[]
  targets: readonly string[]
  priorities: readonly number[]
  payloads: readonly string[]
  order_keys: readonly (string | null)[]
}
const INSERT_NAMES = [
  'project',
  'transaction_id',
  'stage',
  'schema_version',
  'identity_id',
  'ip_address',
  'user_agent',
  'ids',
  'triggers',
  'targets',
  'priorities',
  'payloads',
  'order_keys',
] as const

/**
 * Ids are the project's own (the key is (id, project)): an id the project already has is skipped, a
 * retried request writing nothing twice. `seq` (migration 005) numbers the events in the request's
 * order: the claim breaks a tie of due times by it, so one request's events leave in the order the
 * producer sent them. nextval is evaluated after the ORDER BY, row by row in that order.
 * test/fixtures/sql/insert_events.sql holds it whole, as sent.
 */
export const INSERT_EVENTS = named<InsertParams>()(INSERT_NAMES, insertEventsText(false))

/**
 * The same insert with the request's trace context, for enqueues made while tracing is on: with
 * tracing off the statement sent is {@link INSERT_EVENTS}, byte for byte as before tracing existed.
 */
export const INSERT_TRACED_EVENTS = named<InsertParams & { traceparent: string; tracestate: string | null }>()(
  [...INSERT_NAMES, 'traceparent', 'tracestate'],
  insertEventsText(true),
)

function insertEventsText(traced: boolean): string {
  return `INSERT INTO actions_event (id, project, transaction_id, stage, schema_version, identity_id, ip_address, user_agent,
                              trigger, target, priority, payload, order_key, seq${traced ? ', traceparent, tracestate' : ''})
  SELECT e.id, $project, $transaction_id, $stage, $schema_version, $identity_id, $ip_address, $user_agent,
         e.trigger, e.target, e.priority, e.payload, e.order_key, nextval('actions_event_seq')${traced ? ', $traceparent, $tracestate' : ''}
  FROM unnest($ids::uuid[], $triggers::text[], $targets::text[], $priorities::int[], $payloads::jsonb[], $order_keys::uuid[])
       WITH ORDINALITY AS e(id, trigger, target, priority, payload, order_key, ord)
  ORDER BY e.ord
  ON CONFLICT (id, project) DO NOTHING
  RETURNING id`
}

/** Writes the events in one statement, in their order, skipping ids the project already has; returns the ids actually inserted now. */
export async function insertNewEvents(db: Queryable, ctx: NewEventsContext, events: SerializedEvent[]): Promise<string[]> {
  if (events.length === 0) return []
  const params: InsertParams = {
    project: ctx.project,
    transaction_id: ctx.transactionId,
    stage: ctx.stage,
    schema_version: ctx.schemaVersion,
    identity_id: ctx.identityId,
    ip_address: ctx.ipAddress,
    user_agent: ctx.userAgent,
    ids: events.map(e => e.id),
    triggers: events.map(e => e.trigger),
    targets: events.map(e => e.target),
    priorities: events.map(e => e.priority),
    payloads: events.map(e => e.payloadJson),
    order_keys: events.map(e => e.orderKey ?? null),
  }
  const { rows } = await db.query<{ id: string }>(
    // Prepared once per connection: planning it cost as much as running it, once per enqueue request.
    ctx.trace
      ? {
          name: 'actions_enqueue_traced',
          text: INSERT_TRACED_EVENTS.text,
          values: INSERT_TRACED_EVENTS.values({ ...params, ...ctx.trace }),
        }
      : { name: 'actions_enqueue', text: INSERT_EVENTS.text, values: INSERT_EVENTS.values(params) },
  )
  return rows.map(r => r.id)
}

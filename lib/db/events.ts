import type { Queryable } from './pool.js'

/** A row of `actions_event` as the dispatcher and the operator commands read it. */
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

export type EventState = 'created' | 'retrying' | 'processing' | 'succeed' | 'failed' | 'stopped'

/** One event to write; request-level fields are shared by the whole insert. */
export type NewEvent = { id: string; trigger: string; target: string; priority: number; payload: unknown }

export type NewEventsContext = {
  project: string
  transactionId: string
  stage: string | null
  schemaVersion: number
  identityId: string | null
  ipAddress: string | null
  userAgent: string | null
}

/** Inserts all events in one statement, skipping ids that already exist; returns the ids actually written. */
export async function insertEvents(db: Queryable, ctx: NewEventsContext, events: NewEvent[]): Promise<string[]> {
  if (events.length === 0) return []
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO actions_event (id, project, transaction_id, stage, schema_version, identity_id, ip_address, user_agent,
                                trigger, target, priority, payload)
     SELECT e.id, $1, $2, $3, $4, $5, $6, $7, e.trigger, e.target, e.priority, e.payload
     FROM unnest($8::uuid[], $9::text[], $10::text[], $11::int[], $12::jsonb[]) AS e(id, trigger, target, priority, payload)
     ON CONFLICT (id) DO NOTHING
     RETURNING id`,
    [
      ctx.project, ctx.transactionId, ctx.stage, ctx.schemaVersion, ctx.identityId, ctx.ipAddress, ctx.userAgent,
      events.map(e => e.id), events.map(e => e.trigger), events.map(e => e.target), events.map(e => e.priority),
      events.map(e => JSON.stringify(e.payload)),
    ],
  )
  return rows.map(r => r.id)
}

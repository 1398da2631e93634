import type { Queryable } from './pool.js'

export type { EventRow, EventState } from '../events.js'

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

/** One event to write whose payload is already serialized (enqueue measured it). */
export type SerializedEvent = { id: string; trigger: string; target: string; priority: number; payloadJson: string }

/**
 * Writes the events in one statement unless one of their ids belongs to another project, in which case
 * nothing is written and `clashes` lists those ids. Ids the project already has are skipped (a retried
 * request); `written` lists the ids actually inserted now.
 */
export async function insertNewEvents(db: Queryable, ctx: NewEventsContext, events: SerializedEvent[]): Promise<{ written: string[]; clashes: string[] }> {
  if (events.length === 0) return { written: [], clashes: [] }
  const { rows } = await db.query<{ id: string; clash: boolean }>({
    // Prepared once per connection: planning it cost as much as running it, once per enqueue request.
    name: 'actions_enqueue',
    text: `WITH input AS (
       SELECT * FROM unnest($8::uuid[], $9::text[], $10::text[], $11::int[], $12::jsonb[]) AS e(id, trigger, target, priority, payload)
     ), clash AS (
       SELECT a.id FROM actions_event a JOIN input i ON i.id = a.id WHERE a.project <> $1
     ), ins AS (
       INSERT INTO actions_event (id, project, transaction_id, stage, schema_version, identity_id, ip_address, user_agent,
                                  trigger, target, priority, payload)
       SELECT i.id, $1, $2, $3, $4, $5, $6, $7, i.trigger, i.target, i.priority, i.payload
       FROM input i WHERE NOT EXISTS (SELECT 1 FROM clash)
       ON CONFLICT (id) DO NOTHING
       RETURNING id
     )
     SELECT id, false AS clash FROM ins UNION ALL SELECT id, true AS clash FROM clash`,
    values: [
      ctx.project, ctx.transactionId, ctx.stage, ctx.schemaVersion, ctx.identityId, ctx.ipAddress, ctx.userAgent,
      events.map(e => e.id), events.map(e => e.trigger), events.map(e => e.target), events.map(e => e.priority),
      events.map(e => e.payloadJson),
    ],
  })
  return { written: rows.filter(r => !r.clash).map(r => r.id), clashes: rows.filter(r => r.clash).map(r => r.id) }
}

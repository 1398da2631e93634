import type { Queryable } from './pool.js'

// Statements of the Contember relay on Actions' own database (lib/relay/). The engine's side is
// lib/relay/outbox.ts.

/** One outbox row as the relay writes it into actions_event: the engine's ids, names, priority and creation time. */
export type RelayedEvent = {
  id: string
  transactionId: string
  createdAt: Date
  stage: string | null
  trigger: string
  target: string
  priority: number
  payloadJson: string
  /** The per-entity ordering key (migration 006), or null when the target does not order. */
  orderKey: string | null
}

/**
 * $1 project, $2 schema version, $3..$11 the rows' fields. The engine's `created_at` is kept (it is
 * what receivers see as `meta.createdAt`), and so is its last state change, as upstream sends a first
 * attempt's `meta.lastStateChange`; due now, as a fresh event is. An id the project already
 * has is skipped: a row moved twice (the relay crashed between Actions' commit and the outbox's) is
 * written once. `seq` numbers the rows in the order given, which is the outbox's.
 */
const INSERT_RELAYED_SQL = `INSERT INTO actions_event (id, project, transaction_id, created_at, last_state_change, stage, schema_version,
                            trigger, target, priority, payload, order_key, seq)
  SELECT e.id, $1, e.transaction_id, e.created_at, e.created_at, e.stage, $2, e.trigger, e.target, e.priority, e.payload, e.order_key,
         nextval('actions_event_seq')
  FROM unnest($3::uuid[], $4::uuid[], $5::timestamptz[], $6::text[], $7::text[], $8::text[], $9::int[], $10::jsonb[], $11::uuid[])
       WITH ORDINALITY AS e(id, transaction_id, created_at, stage, trigger, target, priority, payload, order_key, ord)
  ORDER BY e.ord
  ON CONFLICT (id, project) DO NOTHING
  RETURNING id`

/** Writes moved rows in one statement, skipping ids the project already has; returns the ids inserted now. */
export async function insertRelayedEvents(
  db: Queryable,
  project: string,
  schemaVersion: number,
  events: RelayedEvent[],
): Promise<string[]> {
  if (events.length === 0) return []
  const { rows } = await db.query<{ id: string }>(INSERT_RELAYED_SQL, [
    project,
    schemaVersion,
    events.map(e => e.id),
    events.map(e => e.transactionId),
    events.map(e => e.createdAt),
    events.map(e => e.stage),
    events.map(e => e.trigger),
    events.map(e => e.target),
    events.map(e => e.priority),
    events.map(e => e.payloadJson),
    events.map(e => e.orderKey),
  ])
  return rows.map(r => r.id)
}

/** A row the relay left in the outbox, and why. */
export type RefusedRow = { eventId: string; target: string; trigger: string; reason: string }

/** Records (or refreshes) refused rows of a project. */
export async function recordRefused(db: Queryable, project: string, refused: RefusedRow[]): Promise<void> {
  if (refused.length === 0) return
  await db.query(
    `INSERT INTO actions_relay_refused (project, event_id, target, trigger, reason)
     SELECT $1, r.id, r.target, r.trigger, r.reason FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[]) AS r(id, target, trigger, reason)
     ON CONFLICT (project, event_id) DO UPDATE SET reason = excluded.reason, last_refused_at = now()`,
    [project, refused.map(r => r.eventId), refused.map(r => r.target), refused.map(r => r.trigger), refused.map(r => r.reason)],
  )
}

/** Forgets refusals of rows that have now moved. */
export async function forgetRefused(db: Queryable, project: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return
  await db.query(`DELETE FROM actions_relay_refused WHERE project = $1 AND event_id = ANY($2::uuid[])`, [project, ids])
}

/** Forgets every refusal of a project (its schema changed: each row is looked at again); returns how many. */
export async function forgetAllRefused(db: Queryable, project: string): Promise<number> {
  const { rowCount } = await db.query(`DELETE FROM actions_relay_refused WHERE project = $1`, [project])
  return rowCount ?? 0
}

/** A refused row as an operator sees it. */
export type RefusedListing = RefusedRow & { project: string; firstRefusedAt: Date; lastRefusedAt: Date }

/** Refused rows, oldest first, at most `limit`, of one project or all. */
export async function listRefused(db: Queryable, project: string | undefined, limit: number): Promise<RefusedListing[]> {
  const { rows } = await db.query<{
    project: string
    event_id: string
    target: string
    trigger: string
    reason: string
    first_refused_at: Date
    last_refused_at: Date
  }>(
    `SELECT project, event_id, target, trigger, reason, first_refused_at, last_refused_at FROM actions_relay_refused
     WHERE $1::text IS NULL OR project = $1 ORDER BY first_refused_at, event_id LIMIT $2`,
    [project ?? null, limit],
  )
  return rows.map(r => ({
    project: r.project,
    eventId: r.event_id,
    target: r.target,
    trigger: r.trigger,
    reason: r.reason,
    firstRefusedAt: r.first_refused_at,
    lastRefusedAt: r.last_refused_at,
  }))
}

/** Ids of a project's refused rows, at most `limit` (the relay skips them when it reads the outbox). */
export async function refusedIds(db: Queryable, project: string, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ event_id: string }>(
    `SELECT event_id FROM actions_relay_refused WHERE project = $1 ORDER BY first_refused_at, event_id LIMIT $2`,
    [project, limit],
  )
  return rows.map(r => r.event_id)
}

import type { Queryable } from '../db/pool.js'

// Statements on a Contember project's database: the engine's outbox `system.actions_event` as
// @contember/engine-server 2.0.8 writes it (one row per fired trigger, in the content transaction,
// with pg_notify('actions_event', <project slug>)), and the deployed schema in `system.schema`.

/** The channel the engine notifies in the transaction that writes outbox rows; the payload is the project slug. */
export const OUTBOX_CHANNEL = 'actions_event'

/**
 * The outbox's columns and types exactly as engine 2.0.8 creates them. The relay refuses to start on an
 * outbox that differs (a column added, dropped or retyped): it would otherwise guess what a row means.
 */
export const KNOWN_OUTBOX_COLUMNS: Readonly<Record<string, string>> = {
  id: 'uuid',
  transaction_id: 'uuid',
  created_at: 'timestamp with time zone',
  resolved_at: 'timestamp with time zone',
  visible_at: 'timestamp with time zone',
  num_retries: 'integer',
  state: 'actions_trigger_state',
  last_state_change: 'timestamp with time zone',
  stage_id: 'uuid',
  schema_id: 'integer',
  target: 'text',
  trigger: 'text',
  priority: 'integer',
  payload: 'jsonb',
  log: 'jsonb',
}

/**
 * The states the relay takes. `created` is every row the engine writes; `retrying` is a row its own
 * dispatcher tried and will try again (left from before it was turned off). `processing` is not taken:
 * the engine's dispatcher may still be sending it.
 */
export const TAKEN_STATES = ['created', 'retrying'] as const

/** What is wrong with the outbox's columns, one line each; empty when they are exactly the known ones. */
export async function outboxColumnProblems(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ column_name: string; type: string }>(
    `SELECT column_name, CASE WHEN data_type = 'USER-DEFINED' THEN udt_name ELSE data_type END AS type
     FROM information_schema.columns WHERE table_schema = 'system' AND table_name = 'actions_event'`,
  )
  if (rows.length === 0) return ['the table system.actions_event does not exist (is this the database of a Contember 2 project?)']
  const found = new Map(rows.map(r => [r.column_name, r.type]))
  const problems: string[] = []
  for (const [name, type] of Object.entries(KNOWN_OUTBOX_COLUMNS)) {
    const got = found.get(name)
    if (got === undefined) problems.push(`column ${name} (${type}) is missing`)
    else if (got !== type) problems.push(`column ${name} is ${got}, expected ${type}`)
  }
  for (const name of found.keys()) if (!Object.hasOwn(KNOWN_OUTBOX_COLUMNS, name)) problems.push(`column ${name} is not known`)
  return problems.sort()
}

/** One outbox row as the relay reads it (payload as its JSON text, so it is measured before it is parsed). */
export type OutboxRow = {
  id: string
  transactionId: string
  createdAt: Date
  stage: string | null
  target: string
  trigger: string
  priority: number
  payloadJson: string
  payloadBytes: number
}

/**
 * $1 the refused ids to skip, $2 the batch size. Rows are taken by state, never by time: a row's
 * `created_at` is its transaction's start, and a transaction that started earlier can commit later.
 * Within a batch they are in creation order, then in the order they were written (`ctid`), which is
 * the order of one transaction's rows. Locked, skipping rows another relay holds: two relays on one
 * project take different rows. The payload is measured in the database, so an oversized one is
 * refused without being sent to the relay whole.
 */
const TAKE_SQL = `SELECT e.id, e.transaction_id, e.created_at, s.slug AS stage, e.target, e.trigger, e.priority,
         octet_length(e.payload::text) AS payload_bytes,
         CASE WHEN octet_length(e.payload::text) <= $3 THEN e.payload::text END AS payload
  FROM system.actions_event e LEFT JOIN system.stage s ON s.id = e.stage_id
  WHERE e.state::text = ANY($4::text[]) AND NOT (e.id = ANY($1::uuid[]))
  ORDER BY e.created_at, e.ctid
  LIMIT $2
  FOR UPDATE OF e SKIP LOCKED`

/** Locks and reads up to `limit` pending rows not in `skip`; a payload over `maxPayloadBytes` comes back as an empty text. */
export async function takeOutboxRows(db: Queryable, skip: string[], limit: number, maxPayloadBytes: number): Promise<OutboxRow[]> {
  const { rows } = await db.query<{
    id: string
    transaction_id: string
    created_at: Date
    stage: string | null
    target: string
    trigger: string
    priority: number
    payload_bytes: number
    payload: string | null
  }>(TAKE_SQL, [skip, limit, maxPayloadBytes, TAKEN_STATES])
  return rows.map(r => ({
    id: r.id,
    transactionId: r.transaction_id,
    createdAt: r.created_at,
    stage: r.stage,
    target: r.target,
    trigger: r.trigger,
    priority: r.priority,
    payloadJson: r.payload ?? '',
    payloadBytes: Number(r.payload_bytes),
  }))
}

/** Removes moved rows from the outbox (in the transaction that locked them); returns how many. */
export async function deleteOutboxRows(db: Queryable, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0
  const { rowCount } = await db.query(`DELETE FROM system.actions_event WHERE id = ANY($1::uuid[])`, [ids])
  return rowCount ?? 0
}

/** Rows in each state, for the relay's start-up report (rows the engine's dispatcher still holds show as `processing`). */
export async function outboxStates(db: Queryable): Promise<Record<string, number>> {
  const { rows } = await db.query<{ state: string; n: number }>(
    `SELECT state::text AS state, count(*)::int AS n FROM system.actions_event GROUP BY state`,
  )
  return Object.fromEntries(rows.map(r => [r.state, r.n]))
}

/**
 * The deployed schema's `actions` part and its checksum, from `system.schema` (the row `single`): the
 * engine's own source of truth. Its system API's SchemaProvider answers `{ schema }` from this row, and
 * the content API and the trigger evaluation read it too; a migration rewrites it with a new checksum.
 */
export async function deployedActions(db: Queryable): Promise<{ checksum: string; actions: unknown } | undefined> {
  const { rows } = await db.query<{ checksum: string; actions: unknown }>(
    `SELECT checksum, coalesce(schema::jsonb->'actions', '{"triggers":{},"targets":{}}'::jsonb) AS actions FROM system.schema WHERE id = 'single'`,
  )
  return rows[0]
}

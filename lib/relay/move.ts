import type pg from 'pg'
import { orderKey } from '../enqueue/within.js'
import { withTransaction } from '../db/pool.js'
import { forgetRefused, insertRelayedEvents, recordRefused, type RefusedRow, type RelayedEvent } from '../db/relay.js'
import { getCurrentSchema } from '../db/schemas.js'
import type { ActionsSchema } from '../schema/actions.js'
import { inspectJson } from '../schema/json.js'
import { MAX_DEPTH, MAX_PAYLOAD_BYTES } from '../schema/limits.js'
import { deleteOutboxRows, takeOutboxRows, type OutboxRow } from './outbox.js'

/**
 * Payload text read from the outbox at most, in bytes of Postgres' jsonb text: that text puts a space
 * after every `:` and `,`, so it is at most twice the compact JSON Actions measures (MAX_PAYLOAD_BYTES);
 * a row longer than this is certainly over the bound and is refused without its payload being read.
 */
export const MAX_READ_PAYLOAD_BYTES = 2 * MAX_PAYLOAD_BYTES

/** What one move did. */
export type MoveResult = {
  /** Rows read from the outbox (locked). */
  taken: number
  /** Rows now in Actions and gone from the outbox; `written` of them were inserted by this move (the rest were already there). */
  moved: string[]
  written: number
  /** Rows left in the outbox, with their reasons. */
  refused: RefusedRow[]
}

/** Where a move reads and writes: the project's outbox, Actions' database, and the hook tests use to crash between the two commits. */
export type MoveDeps = {
  /** The Contember project's database. */
  source: pg.Pool
  /** Actions' database. */
  actions: pg.Pool
  /** Runs after Actions has committed and before the outbox does; a throw there stands for a crash at that point. */
  afterActionsCommit?: () => Promise<void>
}

/**
 * Moves one batch of a project's outbox into Actions: locks up to `batchSize` pending rows (skipping
 * `skip`, the rows refused before), writes the takeable ones into Actions and records the others'
 * reasons in one Actions transaction, then deletes the moved rows from the outbox and commits. A crash
 * before Actions' commit leaves everything as it was; a crash after it leaves the rows in the outbox,
 * and the next move writes nothing twice (ids Actions already has are skipped) and deletes them then.
 */
export async function moveBatch(deps: MoveDeps, project: string, skip: string[], batchSize: number): Promise<MoveResult> {
  return withTransaction(deps.source, async outbox => {
    const rows = await takeOutboxRows(outbox, skip, batchSize, MAX_READ_PAYLOAD_BYTES)
    if (rows.length === 0) return { taken: 0, moved: [], written: 0, refused: [] }
    const { written, events, refused } = await withTransaction(deps.actions, async db => {
      const current = await getCurrentSchema(db, project)
      const { events, refused } = sortRows(rows, project, current?.schema)
      const inserted = current ? await insertRelayedEvents(db, project, current.version, events) : []
      await recordRefused(db, project, refused)
      await forgetRefused(
        db,
        project,
        events.map(e => e.id),
      )
      return { written: inserted.length, events, refused }
    })
    await deps.afterActionsCommit?.()
    const moved = events.map(e => e.id)
    await deleteOutboxRows(outbox, moved)
    return { taken: rows.length, moved, written, refused }
  })
}

/** Splits rows into events Actions can take and refusals, each with a reason an operator can act on. */
export function sortRows(
  rows: OutboxRow[],
  project: string,
  schema: ActionsSchema | undefined,
): { events: RelayedEvent[]; refused: RefusedRow[] } {
  const events: RelayedEvent[] = []
  const refused: RefusedRow[] = []
  for (const row of rows) {
    const checked = check(row, project, schema)
    if (typeof checked === 'string') refused.push({ eventId: row.id, target: row.target, trigger: row.trigger, reason: checked })
    else events.push(checked)
  }
  return { events, refused }
}

// The reason a row cannot be taken, or the event it becomes. Reasons name the row's target and trigger
// (names from the schema, never a URL) and never quote the payload.
function check(row: OutboxRow, project: string, schema: ActionsSchema | undefined): RelayedEvent | string {
  if (!schema) return `project ${project} has no actions schema in Actions (run the relay's schema import)`
  const target = Object.hasOwn(schema.targets, row.target) ? schema.targets[row.target] : undefined
  if (!target) return `target ${row.target} is not in the current actions schema`
  if (!Object.hasOwn(schema.triggers, row.trigger)) return `trigger ${row.trigger} is not in the current actions schema`
  if (row.payloadBytes > MAX_READ_PAYLOAD_BYTES) return `payload of about ${row.payloadBytes} bytes, expected at most ${MAX_PAYLOAD_BYTES}`
  const payload: unknown = JSON.parse(row.payloadJson)
  const payloadJson = JSON.stringify(payload)
  const bytes = Buffer.byteLength(payloadJson)
  if (bytes > MAX_PAYLOAD_BYTES) return `payload of ${bytes} bytes serialized, expected at most ${MAX_PAYLOAD_BYTES}`
  const problems = inspectJson(payload, ['payload'], { maxDepth: MAX_DEPTH })
  if (problems.length) return problems[0] ?? 'payload is not storable JSON'
  const about = aboutOf(payload)
  if (!about) return 'payload names no entity and id (expected an object with a string entity and a string or number id)'
  return {
    id: row.id,
    transactionId: row.transactionId,
    createdAt: row.createdAt,
    stage: row.stage,
    trigger: row.trigger,
    target: row.target,
    priority: row.priority,
    payloadJson,
    orderKey: target.ordering === 'none' ? null : orderKey(project, row.target, about),
  }
}

function aboutOf(payload: unknown): { entity: string; id: string | number } | undefined {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return undefined
  const entity: unknown = Reflect.get(payload, 'entity')
  const id: unknown = Reflect.get(payload, 'id')
  if (typeof entity !== 'string' || (typeof id !== 'string' && typeof id !== 'number')) return undefined
  return { entity, id }
}

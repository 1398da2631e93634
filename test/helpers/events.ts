import { insertNewEvents, type NewEventsContext } from '../../lib/db/events.js'
import type { TargetHealth } from '../../lib/db/health.js'
import type { Queryable } from '../../lib/db/pool.js'
import { storeSchema } from '../../lib/db/schemas.js'
import type { Deps } from '../../lib/deps.js'
import { enqueue } from '../../lib/enqueue.js'
import { createPayload, TX } from '../fixtures/schemas.js'

/** Stores a schema whose targets point at `url` with the given options, returns its version. */
export async function schemaFor(
  deps: Deps,
  project: string,
  targets: Record<string, Record<string, unknown>>,
  triggers?: Record<string, { target: string; priority?: number }>,
): Promise<number> {
  const trig = triggers ?? Object.fromEntries(Object.keys(targets).map(name => [`to_${name}`, { target: name }]))
  return storeSchema(deps.db, project, {
    targets: Object.fromEntries(Object.entries(targets).map(([name, t]) => [name, { type: 'webhook', name, ...t }])),
    triggers: Object.fromEntries(
      Object.entries(trig).map(([name, t]) => [
        name,
        { type: 'basic', name, entity: 'Article', create: true, delete: false, update: false, ...t },
      ]),
    ),
  })
}

/**
 * Enqueues `count` create events through the real enqueue path, of entities `first`, `first + 1`, …
 * (each its own ordering key unless calls overlap); returns their ids.
 */
export async function enqueueMany(deps: Deps, project: string, trigger: string, count: number, first = 0): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < count; i += 5_000) {
    const n = Math.min(5_000, count - i)
    const res = await enqueue(deps, {
      project,
      transactionId: TX,
      events: Array.from({ length: n }, (_, j) => ({ trigger, payload: createPayload(first + i + j) })),
    })
    ids.push(...res.eventIds)
  }
  return ids
}

/** Event states of a project, by id. */
export async function states(deps: Deps, project: string): Promise<Map<string, { state: string; num_retries: number; log: unknown[] }>> {
  const { rows } = await deps.db.query('SELECT id, state, num_retries, log FROM actions_event WHERE project = $1', [project])
  return new Map(rows.map(r => [r.id, r]))
}

/** The health row of one target, or undefined while it has never failed. */
export async function targetHealth(db: Queryable, project: string, target: string): Promise<TargetHealth | undefined> {
  const { rows } = await db.query<TargetHealth>(
    `SELECT project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms, pause_detail
     FROM actions_target_health WHERE project = $1 AND target = $2`,
    [project, target],
  )
  return rows[0]
}

/** One event to write directly, its payload not yet serialized. */
export type NewEvent = { id: string; trigger: string; target: string; priority: number; payload: unknown }

/** {@link insertNewEvents} for payloads not yet serialized (tests that write events directly). */
export async function insertEvents(db: Queryable, ctx: NewEventsContext, events: NewEvent[]): Promise<string[]> {
  return insertNewEvents(
    db,
    ctx,
    events.map(({ payload, ...e }) => ({ ...e, payloadJson: JSON.stringify(payload) })),
  )
}

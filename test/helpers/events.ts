import { storeSchema } from '../../lib/db/schemas.js'
import type { Deps } from '../../lib/deps.js'
import { enqueue } from '../../lib/enqueue.js'
import { createPayload, TX } from '../fixtures/schemas.js'

/** Stores a schema whose targets point at `url` with the given options, returns its version. */
export async function schemaFor(deps: Deps, project: string, targets: Record<string, Record<string, unknown>>, triggers?: Record<string, { target: string; priority?: number }>): Promise<number> {
  const trig = triggers ?? Object.fromEntries(Object.keys(targets).map(name => [`to_${name}`, { target: name }]))
  return storeSchema(deps.db, project, {
    targets: Object.fromEntries(Object.entries(targets).map(([name, t]) => [name, { type: 'webhook', name, ...t }])),
    triggers: Object.fromEntries(Object.entries(trig).map(([name, t]) => [name, { type: 'basic', name, entity: 'Article', create: true, delete: false, update: false, ...t }])),
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
    const res = await enqueue(deps, { project, transactionId: TX, events: Array.from({ length: n }, (_, j) => ({ trigger, payload: createPayload(first + i + j) })) })
    ids.push(...res.eventIds)
  }
  return ids
}

/** Event states of a project, by id. */
export async function states(deps: Deps, project: string): Promise<Map<string, { state: string; num_retries: number; log: unknown[] }>> {
  const { rows } = await deps.db.query('SELECT id, state, num_retries, log FROM actions_event WHERE project = $1', [project])
  return new Map(rows.map(r => [r.id, r]))
}

import { randomUUID } from 'node:crypto'
import type { Deps } from './deps.js'
import { enqueue } from './enqueue.js'
import { listTargetHealth, pauseLabel, type TargetHealth } from './db/pauses.js'

/**
 * Operational events: with OPS_PROJECT set, the engine enqueues into that project
 * what an operator would be paged for, as mutations an ordinary schema subscribes to (a basic trigger
 * on the entity, `create: true`), delivered, signed and retried like any event. They name the
 * project, the target and why, never a URL, a header or a variable value.
 */
export type OpsEvent =
  | { kind: 'target.paused' | 'target.needs_operator' | 'target.resumed'; project: string; target: string }
  | { kind: 'events.gave_up'; project: string; events: number }

/**
 * Enqueues the events into OPS_PROJECT; nothing when it is unset, and nothing about OPS_PROJECT itself
 * (its own target's pause could not be delivered through it). Never throws: a failure is logged, and
 * the engine's own work goes on.
 */
export async function emitOps(deps: Deps, events: readonly OpsEvent[]): Promise<void> {
  const ops = deps.config.OPS_PROJECT
  const wanted = events.filter(e => e.project !== ops)
  if (!ops || wanted.length === 0) return
  try {
    const health = new Map<string, TargetHealth>()
    for (const project of new Set(wanted.filter(e => e.kind !== 'events.gave_up' && e.kind !== 'target.resumed').map(e => e.project))) {
      for (const h of await listTargetHealth(deps.db, project)) health.set(`${project}\u0000${h.target}`, h)
    }
    const at = new Date().toISOString()
    await enqueue(deps, {
      project: ops,
      transactionId: randomUUID(),
      events: wanted.map(e => {
        const values: Record<string, string | number> =
          e.kind === 'events.gave_up'
            ? { project: e.project, events: e.events, at }
            : { project: e.project, target: e.target, at, ...reasonOf(health.get(`${e.project}\u0000${e.target}`), e.kind) }
        return { payload: { operation: 'create' as const, entity: e.kind, id: randomUUID(), values } }
      }),
    })
  } catch (error) {
    deps.log.error('Could not enqueue operational events into OPS_PROJECT', { events: wanted.length, error })
  }
}

function reasonOf(h: TargetHealth | undefined, kind: OpsEvent['kind']): Record<string, string> {
  if (kind === 'target.resumed' || !h) return {}
  return { reason: pauseLabel(h) ?? 'unknown', ...(h.paused_at ? { pausedAt: h.paused_at.toISOString() } : {}) }
}

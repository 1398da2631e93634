// The operator's stop, for one event and in bulk: the one rule every door (CLI, REST, GraphQL) follows
// and its statements (lib/db/operator.ts). A stop makes nothing due, so it sends no signal.
import { stopEvent, stopEvents, type BulkFilter } from '../db/operator.js'
import type { EventState } from '../events.js'
import { refusal, type Refusal } from './refusal.js'
import type { BulkResult } from './retry.js'
import type { OperatorDeps } from './types.js'

/**
 * The states a stop takes an event from: any not yet resolved for good by a delivery or a stop. A
 * `processing` one is stopped too: its attempt's outcome is then dropped (the record's fence sees the
 * lease gone), so nothing more is sent by us, and the event says it was stopped.
 */
export const STOPPABLE: readonly EventState[] = ['created', 'retrying', 'processing', 'failed']

/** A single stop's result: unknown id, refused (with why), or stopped. */
export type StopResult = { ok: false; found: false } | ({ ok: false; found: true } & Refusal) | { ok: true }

/** Stops event `id` of `project` under the rule. */
export async function stopOne(deps: OperatorDeps, input: { project: string; id: string }): Promise<StopResult> {
  const change = await stopEvent(deps.db, input.project, input.id, STOPPABLE)
  if (!change.found) return { ok: false, found: false }
  if (!change.changed) return { ok: false, found: true, ...refusal('stop', change.was, STOPPABLE.includes(change.was)) }
  return { ok: true }
}

/** The bulk stop: what it skips is what changed between its pick and its update (an event a dispatcher claimed). */
export async function stopMany(deps: OperatorDeps, filter: BulkFilter): Promise<BulkResult> {
  const { matched, changed } = await stopEvents(deps.db, filter)
  return { matched, changed, skipped: matched - changed, limitReached: matched === filter.limit }
}

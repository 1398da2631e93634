// The operator's retry, for one event and in bulk: the one rule every door (CLI, REST, GraphQL)
// follows, its statements (lib/db/operator.ts) and the project's wake-up signal.
import { retryEvent, retryEvents, type BulkFilter } from '../db/operator.js'
import type { EventState } from '../events.js'
import { refusal, type Refusal } from './refusal.js'
import { wakeProject, type OperatorDeps, type SignalOutcome } from './types.js'

/**
 * The states a retry takes an event from. An event being delivered (`processing`) is never retried:
 * the retry would make it due while the first attempt is in flight, and a second dispatcher would
 * deliver it beside the first (out of per-entity order, and twice); its attempt's end decides.
 */
export const RETRYABLE: readonly EventState[] = ['created', 'retrying', 'failed']

/** The states a retry with `force` takes an event from besides: delivering a delivered or stopped event again is a choice. */
export const RETRYABLE_WITH_FORCE: readonly EventState[] = [...RETRYABLE, 'succeed', 'stopped']

/** A single retry's result: unknown id, refused (with why), or made due now (and the signal's outcome). */
export type RetryResult = { ok: false; found: false } | ({ ok: false; found: true } & Refusal) | { ok: true; signal: SignalOutcome }

/** Retries event `id` of `project` under the rule, then wakes the project when it changed. */
export async function retryOne(deps: OperatorDeps, input: { project: string; id: string; force?: boolean }): Promise<RetryResult> {
  const from = input.force ? RETRYABLE_WITH_FORCE : RETRYABLE
  const change = await retryEvent(deps.db, input.project, input.id, from)
  if (!change.found) return { ok: false, found: false }
  if (!change.changed) return { ok: false, found: true, ...refusal('retry', change.was, from.includes(change.was)) }
  return { ok: true, signal: await wakeProject(deps.signals, input.project) }
}

/** A bulk verb's result: matched by the filter, changed, skipped (matched but changed by someone else meanwhile, e.g. claimed). */
export type BulkResult = { matched: number; changed: number; skipped: number; limitReached: boolean }

/**
 * The bulk retry: the filter's states (failed or retrying) are both retryable, so what it skips is
 * only what changed between its pick and its update (an event a dispatcher claimed); one signal when
 * any changed.
 */
export async function retryMany(deps: OperatorDeps, filter: BulkFilter): Promise<BulkResult & { signal: SignalOutcome }> {
  const { matched, changed } = await retryEvents(deps.db, filter)
  const signal: SignalOutcome = changed > 0 ? await wakeProject(deps.signals, filter.project) : { sent: false, why: 'none' }
  return { matched, changed, skipped: matched - changed, limitReached: matched === filter.limit, signal }
}

/**
 * Where a claim queue is (lib/dispatch/claims.ts). One value instead of loose flags, so a reader sees
 * what the queue will do next and every change of it is checked against this table:
 *
 * - `ready`: a claim is worth making the next time a worker asks.
 * - `claiming`: one claim statement is under way (there is never a second).
 * - `idle`: the last claim found nothing more due; only claims going back, the last delivery under way
 *   finishing, or a capped target's slot freeing make another worth its statement.
 * - `exhausted`: no claim can be made until a delivery finishes: the byte budget, the queue or the caps
 *   are spent, or no target fits the time left.
 * - `stopping`: the drain stopped the queue while a claim was under way; it ends in `stopped` with it.
 * - `stopped`: the drain ended or yielded its slice; the queue never claims again.
 * - `failed`: a claim failed; the drain stops on its error.
 */
export type ClaimQueueState = 'ready' | 'claiming' | 'idle' | 'exhausted' | 'stopping' | 'stopped' | 'failed'

/** The states each state may go to; the two terminal ones go nowhere. */
const NEXT: Readonly<Record<ClaimQueueState, readonly ClaimQueueState[]>> = {
  ready: ['claiming', 'exhausted', 'stopped'],
  claiming: ['ready', 'idle', 'exhausted', 'stopping', 'failed'],
  idle: ['ready', 'stopped'],
  exhausted: ['ready', 'stopped'],
  stopping: ['stopped', 'failed'],
  stopped: [],
  failed: [],
}

/** A claim queue tried a change of state its table does not allow: a bug in Actions, never in the data it reads. */
export class ClaimQueueStateError extends Error {
  override name = 'ClaimQueueStateError'
  constructor(
    readonly from: ClaimQueueState,
    readonly to: ClaimQueueState,
  ) {
    super(`Internal error: a claim queue cannot go from '${from}' to '${to}'`)
  }
}

/** Returns `to` when a queue in `from` may go there; throws {@link ClaimQueueStateError} otherwise. */
export function checkedTransition(from: ClaimQueueState, to: ClaimQueueState): ClaimQueueState {
  if (!NEXT[from].includes(to)) throw new ClaimQueueStateError(from, to)
  return to
}

import type { ClaimResult, TargetClaimConfig } from '../db/claim.js'
import type { ByteBudget } from './byte-budget.js'
import type { EmptyTargets } from './empty-targets.js'
import type { QueuedClaims } from './queued-claims.js'
import type { ResolvedTarget } from './resolve.js'
import type { TargetWaits } from './target-waits.js'

/** What a claim queue holds and knows, read to decide what a claim asks for and what its answer says. */
export type ClaimBook = {
  queue: QueuedClaims
  bytes: ByteBudget
  waits: TargetWaits
  empty: EmptyTargets
  /** Batches queued ahead of the workers, and held of one target at most (queueDepth). */
  prefetch: number
  perTarget: number
}

/** What a claim asks for: the targets with the batches each may take, and the batches at most. */
export type ClaimPlan = { offered: TargetClaimConfig[]; want: number }

/** Where a finished claim leaves its queue, unless the queue was stopped meanwhile. */
export type AfterClaim = 'ready' | 'idle' | 'exhausted'

/**
 * What a claim of the `ready` targets (those whose deliveries fit the time left) would ask for now;
 * `wait` when no claim is worth its statement now, `exhausted` when none can be made until a
 * delivery finishes (the byte budget or the caps are spent) or no target fits the time left.
 */
export function planClaim(book: ClaimBook, ready: readonly ResolvedTarget[]): ClaimPlan | 'wait' | 'exhausted' {
  const offered = offeredTargets(book, ready)
  const want = Math.min(
    book.prefetch - book.queue.length,
    book.bytes.batchesThatFit(),
    offered.reduce((n, t) => n + t.maxBatches, 0),
  )
  if (offered.length > 0 && want > 0) return { offered, want }
  return ready.length === 0 || offered.length > 0 ? 'exhausted' : 'wait'
}

/**
 * The targets a claim asks for, each with the batches it may still take: those holding at most half
 * their cap. A claim is made when the queue is half empty (as deep as needed, never a round trip per
 * batch) or, earlier, when a target may have work nobody claimed yet: not asked yet, or found without
 * due events long enough ago (EmptyTargets), so a dead target's queue cannot hide a healthy one.
 */
function offeredTargets({ queue, waits, empty, prefetch, perTarget }: ClaimBook, ready: readonly ResolvedTarget[]): TargetClaimConfig[] {
  const now = performance.now()
  const open = ready.filter(t => queue.heldBy(t.name) <= perTarget / 2 && waits.isOpen(t.name, now))
  const unasked = open.some(t => (empty.worthAsking(t.name, now) && queue.heldBy(t.name) === 0) || waits.isCapped(t.name))
  if (queue.length > prefetch / 2 && !unasked) return []
  return open.map(t => ({
    name: t.name,
    batchSize: t.batchSize,
    leaseMs: t.leaseMs,
    maxBatches: perTarget - queue.heldBy(t.name),
    maxAttempts: t.maxAttempts,
    ...(t.maxInFlight !== undefined ? { maxInFlight: t.maxInFlight } : {}),
    ...(t.maxPerSecond !== undefined ? { maxPerSecond: t.maxPerSecond } : {}),
  }))
}

/**
 * What a finished claim (of `plan`, within `budgetBytes`) says about what is due. A target at its cap,
 * or a claim cut at `want`, may hide more due events, and so may every target when the byte budget may
 * have cut the claim: no target is marked empty then (EmptyTargets). Fewer batches than asked, with
 * nothing failed and nothing changed meanwhile: the queue is idle (nothing due waits for claims going
 * back or every delivery ending), or exhausted when the budget cut it (only the next delivery to free
 * bytes is waited for).
 */
export function judgeClaim(
  book: ClaimBook,
  claimed: ClaimResult,
  { offered, want }: ClaimPlan,
  budgetBytes: number,
  changedMeanwhile: boolean,
): AfterClaim {
  const got = new Map<string, number>()
  for (const b of claimed.batches) got.set(b.target, (got.get(b.target) ?? 0) + 1)
  const full = claimed.batches.length >= want || offered.some(t => (got.get(t.name) ?? 0) >= t.maxBatches)
  const cut = book.bytes.mayHaveCut(claimed.batches, budgetBytes)
  book.empty.afterClaim(offered, got, full || cut, t => book.waits.isCapped(t))
  const short = !full && claimed.unknownTarget.length === 0 && claimed.spent.length === 0 && !changedMeanwhile
  return !short ? 'ready' : cut ? 'exhausted' : 'idle'
}

import type { ClaimedBatch } from '../db/claim.js'
import type { FlowOutcome } from '../db/flow.js'
import type { ResolvedTarget } from './resolve.js'

/** A claimed batch waiting for (or under) delivery. */
export type Claimed = {
  batch: ClaimedBatch
  target: ResolvedTarget
  claimedAt: number
  /** A rate-capped target's batch may not be sent before this (performance.now()); its worker waits. */
  startAt?: number
}

/** Events claimed ahead of the workers (at least {@link PREFETCH_BATCHES_PER_WORKER} batches per worker). */
const PREFETCH_EVENTS = 256
/**
 * Batches queued per worker at least. A claim refills half the queue, so with large batches this sets
 * the claim's size: at two per worker (claims of about 8 batches of 50) the serial claim was in flight
 * 87% of a batchSize 50 drain and bounded it; at four (claims of about 16) the drain delivered 13–15%
 * more (`actions-b50`: 18,300/s at two batches per worker, 20,900/s at four; six to twelve within the
 * spread). Small batches are sized by PREFETCH_EVENTS instead.
 */
const PREFETCH_BATCHES_PER_WORKER = 4

/**
 * How deep a claim queue is: `prefetch` batches queued ahead of the workers, at most `perTarget` of
 * them (queued or in flight) of one target.
 */
export function queueDepth(runnable: readonly ResolvedTarget[], concurrency: number): { prefetch: number; perTarget: number } {
  // A few hundred events, and a few batches per worker: a worker never waits for a claim round trip.
  const maxBatchSize = Math.max(1, ...runnable.map(t => t.batchSize))
  const prefetch = Math.max(PREFETCH_BATCHES_PER_WORKER * concurrency, Math.ceil(PREFETCH_EVENTS / maxBatchSize))
  // Alone, a target may fill the queue; beside others, half of it, so there is always room for them.
  return { prefetch, perTarget: runnable.length > 1 ? Math.ceil(prefetch / 2) : prefetch }
}

/**
 * The batches a claim queue holds, in claim order, and per target how many it holds (queued or in
 * flight) and how many are in flight (handed out, not yet finished). The counts change before any
 * await, so a worker's share is never decided on a stale count.
 */
export class QueuedClaims {
  private readonly queue: Claimed[] = []
  private readonly held = new Map<string, number>()
  private readonly inFlight = new Map<string, number>()

  /** Batches queued, not handed out. */
  get length(): number {
    return this.queue.length
  }

  /** Batches handed out and not yet finished. */
  get delivering(): number {
    let n = 0
    for (const v of this.inFlight.values()) n += v
    return n
  }

  /** Batches of the target queued or in flight. */
  heldBy(target: string): number {
    return this.held.get(target) ?? 0
  }

  /** The targets holding at least one batch (queued or in flight). */
  holders(): Set<string> {
    const names = new Set<string>()
    for (const [name, n] of this.held) if (n > 0) names.add(name)
    return names
  }

  /** Queues claimed batches behind those queued already. */
  add(claims: readonly Claimed[]): void {
    for (const c of claims) count(this.held, c.target.name, 1)
    this.queue.push(...claims)
  }

  /** Takes the first queued batch of a target with fewer than `share` batches in flight, if any. */
  takeBelowShare(share: number): Claimed | undefined {
    const i = this.queue.findIndex(c => (this.inFlight.get(c.target.name) ?? 0) < share)
    return i < 0 ? undefined : this.queue.splice(i, 1)[0]
  }

  /** Takes the first queued batch, whatever its target's share. */
  takeFirst(): Claimed | undefined {
    return this.queue.shift()
  }

  /** Removes and returns the queued batches that match. */
  take(matches: (c: Claimed) => boolean): Claimed[] {
    const taken = this.queue.filter(matches)
    for (const c of taken) this.queue.splice(this.queue.indexOf(c), 1)
    return taken
  }

  /** Removes and returns every queued batch. */
  takeAll(): Claimed[] {
    return this.queue.splice(0)
  }

  /** Counts a taken batch as handed out to a worker. */
  handedOut(c: Claimed): void {
    count(this.inFlight, c.target.name, 1)
  }

  /** A handed-out batch was delivered: it is neither in flight nor held any more. */
  finished(c: Claimed): void {
    count(this.inFlight, c.target.name, -1)
    count(this.held, c.target.name, -1)
  }

  /** Taken batches that go back to the database unattempted are held no more. */
  released(claims: readonly Claimed[]): void {
    for (const c of claims) count(this.held, c.target.name, -1)
  }
}

/**
 * The claimed batches as queue entries, each with its target and, for a rate-capped target, its start
 * time; `strays` are those of a target not among `ready` or held now (a claim under way when its target
 * was held brings batches that must wait too), which the claim must hand back.
 */
export function queueEntries(
  batches: readonly ClaimedBatch[],
  ready: readonly ResolvedTarget[],
  flow: ReadonlyMap<string, FlowOutcome>,
  isHeld: (target: string) => boolean,
): { kept: Claimed[]; strays: ClaimedBatch[] } {
  const claimedAt = performance.now()
  const strays: ClaimedBatch[] = []
  const kept: Claimed[] = []
  const nth = new Map<string, number>()
  for (const batch of batches) {
    const target = ready.find(t => t.name === batch.target)
    if (!target || isHeld(target.name)) {
      strays.push(batch)
      continue
    }
    const i = nth.get(target.name) ?? 0
    nth.set(target.name, i + 1)
    const startsIn = flow.get(target.name)?.startsInMs[i]
    kept.push({ batch, target, claimedAt, ...(startsIn ? { startAt: claimedAt + startsIn } : {}) })
  }
  return { kept, strays }
}

function count(map: Map<string, number>, name: string, by: number): void {
  map.set(name, (map.get(name) ?? 0) + by)
}

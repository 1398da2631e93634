import { claimBatches, type ClaimedBatch, type ClaimLimits, type ClaimResult, type TargetClaimConfig } from '../db/claim.js'
import type pg from 'pg'
import { claimWithCaps, isCapped, type FlowOutcome } from '../db/flow.js'
import { releaseClaims } from '../db/record.js'
import type { ResolvedTarget } from './resolve.js'

/** A claimed batch waiting for (or under) delivery. */
export type Claimed = {
  batch: ClaimedBatch; target: ResolvedTarget; claimedAt: number
  /** A rate-capped target's batch may not be sent before this (performance.now()); its worker waits. */
  startAt?: number
}

/** What {@link ClaimQueue.next} hands a worker: a batch to deliver, `again` (ask once more), or `empty`. */
export type Next = Claimed | 'again' | 'empty'

export type ClaimQueueInput = {
  db: pg.Pool
  project: string
  /** Every target of the stored schema, resolved; held-back ones wait, unclaimed. */
  targets: ReadonlyMap<string, ResolvedTarget>
  concurrency: number
  maxClaimedBytes: number
  /** Whether a delivery to the target still fits in the invocation's time left. */
  fits: (t: ResolvedTarget) => boolean
  /** Runs before each claim statement (the drain lets the recorder catch up there). */
  beforeClaim: () => Promise<void>
  /** What the claim did besides claiming: events it failed (unknown target, last attempt lost) and lost attempts it counted. */
  onClaimFailures: (claimed: Pick<ClaimResult, 'unknownTarget' | 'spent' | 'lost'>) => void
}

/** Events claimed ahead of the workers (at least {@link PREFETCH_BATCHES_PER_WORKER} batches per worker). */
const PREFETCH_EVENTS = 256
/**
 * Batches queued per worker at least. A claim refills half the queue, so with large batches this sets
 * the claim's size: at two per worker (claims of about 8 batches of 50) the serial claim was in flight
 * 87% of a batchSize 50 drain and bounded it; at four (claims of about 16) the drain delivered 13–15%
 * more (bench/README.md, "Claim size at batchSize 50"). Small batches are sized by PREFETCH_EVENTS instead.
 */
const PREFETCH_BATCHES_PER_WORKER = 4
/**
 * How long a target the claim found nothing due for is left out of the claims made only for it: a
 * drain asks again this often, so a target whose events become due mid-drain joins within a second.
 */
const EMPTY_RECHECK_MS = 1_000
/**
 * How soon a target cut by its `maxInFlight` is asked again when none of its own deliveries ends
 * first (its requests in flight may be another drain's).
 */
const CAP_RECHECK_MS = 50

/**
 * Claimed batches, queued ahead of the workers and handed out fairly. One claim statement at a time
 * refills the queue before it runs dry, within a byte budget (DISPATCH_MAX_CLAIMED_BYTES) and a cap
 * per target, so a slow or dead target cannot fill it alone. A worker gets the first queued batch of a
 * target below its share of the workers (the concurrency over the targets with work); claims whose
 * time or lease ran short go back to the database unattempted.
 */
export class ClaimQueue {
  private readonly queue: Claimed[] = []
  private readonly runnable: ResolvedTarget[]
  private readonly prefetch: number
  private readonly perTarget: number
  private readonly bytes: ByteBudget
  private readonly held = new Map<string, number>()
  private readonly inFlight = new Map<string, number>()
  /** When a claim last found nothing due for a target; absent: not asked yet, or it had work. */
  private readonly emptyAt = new Map<string, number>()
  /** Targets a receiver's Retry-After holds, until when (performance.now()); the database holds them for every other drain. */
  private readonly holds = new Map<string, number>()
  /** Targets whose caps cut the last claim, and when they are worth asking again (performance.now()). */
  private readonly capped = new Map<string, number>()
  private claiming: Promise<void> | undefined
  /** No claim can be made now: the byte budget or the queue is full, or no target fits the time left. */
  private exhausted = false
  /**
   * The last claim found nothing more due. Only claims going back, or the last delivery under way
   * finishing, make another claim worth its statement (a retry is written after its delivery, and is
   * due seconds later); new events have signals of their own. Re-claiming after every finished
   * delivery cost a drain of a few events four claims instead of two.
   */
  private idle = false
  private stopped = false
  // Counts events that may have become claimable (claims went back, every delivery finished): a claim
  // that ran meanwhile may have missed them, so it cannot call the project idle.
  private changes = 0
  private failure: unknown
  /** Some target's events were left because its timeout no longer fits: the drain stops for time. */
  leftForTime: boolean

  constructor(private readonly input: ClaimQueueInput) {
    const all = [...input.targets.values()]
    this.runnable = all.filter(t => !t.heldBack)
    this.leftForTime = all.some(t => t.heldBack === 'too slow')
    // A few hundred events, and a few batches per worker: a worker never waits for a claim round trip.
    const maxBatchSize = Math.max(1, ...this.runnable.map(t => t.batchSize))
    this.prefetch = Math.max(PREFETCH_BATCHES_PER_WORKER * input.concurrency, Math.ceil(PREFETCH_EVENTS / maxBatchSize))
    // Alone, a target may fill the queue; beside others, half of it, so there is always room for them.
    this.perTarget = this.runnable.length > 1 ? Math.ceil(this.prefetch / 2) : this.prefetch
    this.bytes = new ByteBudget(input.maxClaimedBytes)
  }

  /** The first claim failure, if any: the drain stops on it. */
  get error(): unknown {
    return this.failure
  }

  /** The next batch for a worker, after checking that its time and lease still allow a delivery. */
  async next(): Promise<Next> {
    if (this.failure) return 'empty'
    void this.refill()
    const next = this.pick()
    if (!next) {
      const pending = this.claiming ?? this.refill()
      if (pending) {
        await pending
        return 'again'
      }
      const any = this.queue.shift()
      if (!any) return 'empty'
      return this.checked(any)
    }
    return this.checked(next)
  }

  /** Marks a batch handed out by {@link next} as done: its bytes are free; once no delivery is under way, another claim is worth making. */
  finished(c: Claimed): void {
    this.count(this.inFlight, c.target.name, -1)
    this.count(this.held, c.target.name, -1)
    this.bytes.freed(c.batch)
    if (this.delivering === 0) this.changed()
    else this.exhausted = false
  }

  /** Stops claiming and hands every queued claim back at once (a drain ending, or yielding its slice). */
  async stop(): Promise<void> {
    this.stopped = true
    await this.claiming
    if (this.queue.length > 0) await this.release(this.queue.splice(0))
  }

  /** Hands the queued claims of one target back at once (the circuit breaker just paused it: only probes reach it now). */
  async releaseTarget(target: string): Promise<void> {
    const taken = this.takeQueued(c => c.target.name === target)
    if (taken.length > 0) await this.release(taken)
  }

  /**
   * Holds a target for `ms` (its receiver answered 429 or 503 with Retry-After): its queued claims go
   * back at once, unattempted, and none is handed out or claimed in this drain until then. Other drains
   * see the hold once the outcome is recorded (actions_target_health.hold_until).
   */
  async holdTarget(target: string, ms: number): Promise<void> {
    this.holds.set(target, Math.max(this.holds.get(target) ?? 0, performance.now() + ms))
    await this.releaseTarget(target)
  }

  /**
   * Outcomes of these targets were just written: a target its maxInFlight cut has a request fewer in
   * flight (the database counts a request until its record), so it is worth a claim at once.
   */
  recorded(rows: ReadonlyArray<{ target: string }>): void {
    if (this.capped.size === 0) return
    for (const name of new Set(rows.map(r => r.target))) {
      if (!this.capped.has(name) || this.input.targets.get(name)?.maxInFlight === undefined) continue
      this.capped.set(name, performance.now())
      this.idle = false
      this.exhausted = false
    }
  }

  /** Ms until a target its caps cut is worth claiming for again, if one is; the drain waits for it rather than end. */
  nextCapMs(): number | undefined {
    if (this.capped.size === 0) return undefined
    return Math.max(0, Math.min(...this.capped.values()) - performance.now())
  }

  private isHeld(target: string): boolean {
    const until = this.holds.get(target)
    if (until === undefined) return false
    if (until > performance.now()) return true
    this.holds.delete(target)
    return false
  }

  /** Batches handed out and not yet finished (counted as they are handed out, before any await). */
  get delivering(): number {
    let n = 0
    for (const v of this.inFlight.values()) n += v
    return n
  }

  /** Claims still queued: a drain that ends with some left must release them. */
  get queued(): number {
    return this.queue.length
  }

  /** Waits for a claim under way (a drain ends only after it). */
  async settled(): Promise<void> {
    await this.claiming
  }

  /** Claims once more now, whatever the last claim found; true when batches are queued after it. */
  async claimAgain(): Promise<boolean> {
    this.changed()
    await this.refill()
    if (this.failure) throw this.failure
    return this.queue.length > 0
  }

  private changed(): void {
    this.changes++
    this.exhausted = false
    this.idle = false
  }

  private count(map: Map<string, number>, name: string, by: number): void {
    map.set(name, (map.get(name) ?? 0) + by)
  }

  /**
   * The first queued batch of a target below its share of the workers. The targets sharing them are
   * those holding claims and those not yet found without due events. Undefined when every queued
   * batch's target has its share (a claim may bring another target's batch) or nothing is queued.
   */
  private pick(): Claimed | undefined {
    const sharing = new Set([...this.held].filter(([, n]) => n > 0).map(([name]) => name))
    for (const t of this.runnable) if (!this.emptyAt.has(t.name) && this.input.fits(t)) sharing.add(t.name)
    const share = Math.ceil(this.input.concurrency / Math.max(1, sharing.size))
    const i = this.queue.findIndex(c => (this.inFlight.get(c.target.name) ?? 0) < share)
    return i < 0 ? undefined : this.queue.splice(i, 1)[0]
  }

  /** Hands out a claim, or releases it (and the queued claims in the same trouble) when it can no longer be delivered safely. */
  private async checked(next: Claimed): Promise<Next> {
    const fits = this.input.fits
    if (!fits(next.target)) {
      // Out of time for this target: its queued claims go back at once, due now, for the continuation;
      // faster targets go on.
      this.leftForTime = true
      await this.release([next, ...this.takeQueued(c => !fits(c.target))])
      return 'again'
    }
    const unsafe = (c: Claimed) => performance.now() - c.claimedAt + c.target.timeoutMs > c.target.leaseMs
    if (unsafe(next)) {
      // Its lease could run out mid-delivery, letting another dispatcher take the events too; claims
      // queued behind a slow target age together, so all that are as old go back in one statement.
      await this.release([next, ...this.takeQueued(unsafe)])
      return 'again'
    }
    this.count(this.inFlight, next.target.name, 1)
    return next
  }

  /** Removes and returns the queued claims that match. */
  private takeQueued(matches: (c: Claimed) => boolean): Claimed[] {
    const taken = this.queue.filter(matches)
    for (const c of taken) this.queue.splice(this.queue.indexOf(c), 1)
    return taken
  }

  /** Hands claims back without an attempt; their bytes are free at once, their events claimable once released. */
  private async release(claims: Claimed[]): Promise<void> {
    for (const c of claims) {
      this.bytes.freed(c.batch)
      this.count(this.held, c.target.name, -1)
    }
    await releaseClaims(this.input.db, this.input.project, claims.flatMap(c => c.batch.events.map(e => ({ id: e.id, lease: e.lease }))))
    this.changed()
  }

  /** Starts a claim when one is worth making; returns the claim under way, if any. */
  private refill(): Promise<void> | undefined {
    if (this.claiming || this.exhausted || this.idle || this.stopped || this.failure) return this.claiming
    const ready = this.runnable.filter(this.input.fits)
    if (ready.length < this.runnable.length) this.leftForTime = true
    const offered = this.offered(ready)
    const want = Math.min(this.prefetch - this.queue.length, this.bytes.batchesThatFit(), offered.reduce((n, t) => n + t.maxBatches, 0))
    if (offered.length === 0 || want <= 0) {
      // Nothing to ask for until a delivery finishes (the budget or the caps are spent) or time runs out.
      if (ready.length === 0 || (offered.length > 0 && want <= 0)) this.exhausted = true
      return undefined
    }
    this.claiming = this.claim(ready, offered, want)
      .catch(e => { this.failure ??= e })
      .finally(() => { this.claiming = undefined })
    return this.claiming
  }

  /**
   * The targets a claim asks for, each with the batches it may still take: those holding at most half
   * their cap. A claim is made when the queue is half empty (as deep as needed, never a round trip per
   * batch) or, earlier, when a target may have work nobody claimed yet: not asked yet, or found without
   * due events more than EMPTY_RECHECK_MS ago (so a dead target's queue cannot hide a healthy one).
   */
  private offered(ready: readonly ResolvedTarget[]): TargetClaimConfig[] {
    const now = performance.now()
    const open = ready.filter(t => (this.held.get(t.name) ?? 0) <= this.perTarget / 2 && !this.isHeld(t.name) && (this.capped.get(t.name) ?? 0) <= now)
    const unasked = open.some(t => (now - (this.emptyAt.get(t.name) ?? -Infinity) >= EMPTY_RECHECK_MS && (this.held.get(t.name) ?? 0) === 0) || this.capped.has(t.name))
    if (this.queue.length > this.prefetch / 2 && !unasked) return []
    return open.map(t => ({
      name: t.name, batchSize: t.batchSize, leaseMs: t.leaseMs, maxBatches: this.perTarget - (this.held.get(t.name) ?? 0), maxAttempts: t.maxAttempts,
      ...(t.maxInFlight !== undefined ? { maxInFlight: t.maxInFlight } : {}), ...(t.maxPerSecond !== undefined ? { maxPerSecond: t.maxPerSecond } : {}),
    }))
  }

  private async claim(ready: readonly ResolvedTarget[], offered: readonly TargetClaimConfig[], want: number): Promise<void> {
    await this.input.beforeClaim()
    // Events of held and too slow targets wait, and so do those of targets at their cap; only a target
    // missing from the schema fails.
    const waiting = [...this.input.targets.keys()].filter(name => !offered.some(t => t.name === name))
    const changesBefore = this.changes
    const budgetBytes = this.bytes.left()
    const { result: claimed, flow } = await this.claimStatements(offered, want, { waiting, budgetBytes, atLeastOne: this.bytes.held() === 0 })
    this.input.onClaimFailures(claimed)
    const claimedAt = performance.now()
    for (const [name, f] of flow) {
      if (!f.capped) this.capped.delete(name)
      else this.capped.set(name, claimedAt + (f.capped.by === 'rate' ? f.capped.inMs : CAP_RECHECK_MS))
    }
    const strays = this.enqueue(claimed, ready, flow)
    // A claim asks only for offered targets, so there are none; if there were, their events must not
    // sit in processing until their leases end.
    if (strays.length > 0) {
      await releaseClaims(this.input.db, this.input.project, strays.flatMap(b => b.events.map(e => ({ id: e.id, lease: e.lease }))))
      this.changed()
    }
    // A target at its cap, or a claim cut at `want`, may hide more due events behind it.
    const full = claimed.batches.length >= want || offered.some(t => claimed.batches.filter(b => b.target === t.name).length >= t.maxBatches)
    // Otherwise a target that got fewer batches than it could take has nothing more due now.
    for (const t of offered) {
      const got = claimed.batches.filter(b => b.target === t.name).length
      // A target its caps cut has more due: it is asked again when they allow (`capped`).
      if (this.capped.has(t.name)) this.emptyAt.delete(t.name)
      else if (!full && got < t.maxBatches) this.emptyAt.set(t.name, performance.now())
      else if (got > 0) this.emptyAt.delete(t.name)
    }
    // Fewer batches than asked: nothing else is due now, unless the byte budget may have cut the claim
    // (one more batch as large as the largest taken would not have fitted). Nothing due waits for claims
    // going back or for every delivery to end; a spent budget only for the next delivery to free bytes.
    const short = !full && claimed.unknownTarget.length === 0 && claimed.spent.length === 0 && this.changes === changesBefore
    const taken = claimed.batches.reduce((n, b) => n + b.bytes, 0)
    const largest = Math.max(this.bytes.meanBatch(), ...claimed.batches.map(b => b.bytes))
    const cut = taken + largest > budgetBytes
    this.idle = short && !cut
    this.exhausted = short && cut
  }

  /**
   * One claim statement for the uncapped targets and, when capped ones are offered, a transaction that
   * holds those to their caps (lib/db/flow.ts): a capped target's claims run one at a time across
   * drains, and the uncapped ones must not wait for that. Each leaves the other's targets waiting.
   */
  private async claimStatements(offered: readonly TargetClaimConfig[], want: number, limits: ClaimLimits): Promise<{ result: ClaimResult; flow: Map<string, FlowOutcome> }> {
    const capped = offered.filter(isCapped)
    const free = offered.filter(t => !isCapped(t))
    const names = (ts: readonly TargetClaimConfig[]) => ts.map(t => t.name)
    const plain = free.length === 0 ? undefined
      : await claimBatches(this.input.db, this.input.project, free, want, { ...limits, waiting: [...limits.waiting, ...names(capped)] })
    if (capped.length === 0) return { result: plain ?? { batches: [], unknownTarget: [], spent: [], lost: 0 }, flow: new Map() }
    const taken = plain?.batches.reduce((n, b) => n + b.bytes, 0) ?? 0
    const { result, flow } = await claimWithCaps(this.input.db, this.input.project, capped, Math.max(1, want - (plain?.batches.length ?? 0)), {
      ...limits, waiting: [...limits.waiting, ...names(free)], budgetBytes: Math.max(0, limits.budgetBytes - taken), atLeastOne: limits.atLeastOne && !plain?.batches.length,
    })
    if (!plain) return { result, flow }
    return {
      result: {
        batches: [...plain.batches, ...result.batches], unknownTarget: [...plain.unknownTarget, ...result.unknownTarget],
        spent: [...plain.spent, ...result.spent], lost: plain.lost + result.lost,
      },
      flow,
    }
  }

  /** Queues the claimed batches; returns those of a target not offered, which the claim must hand back. */
  private enqueue(claimed: ClaimResult, ready: readonly ResolvedTarget[], flow: ReadonlyMap<string, FlowOutcome>): ClaimedBatch[] {
    const claimedAt = performance.now()
    const strays: ClaimedBatch[] = []
    const kept: Claimed[] = []
    const nth = new Map<string, number>()
    for (const batch of claimed.batches) {
      const target = ready.find(t => t.name === batch.target)
      // A claim under way when its target was held brings batches that must wait too.
      if (!target || this.isHeld(target.name)) {
        strays.push(batch)
        continue
      }
      const i = nth.get(target.name) ?? 0
      nth.set(target.name, i + 1)
      const startsIn = flow.get(target.name)?.startsInMs[i]
      kept.push({ batch, target, claimedAt, ...(startsIn ? { startAt: claimedAt + startsIn } : {}) })
    }
    this.bytes.claimed(kept.map(c => c.batch))
    for (const c of kept) this.count(this.held, c.target.name, 1)
    this.queue.push(...kept)
    return strays
  }

}

/** Payload bytes held in claimed events (queued and in flight) against DISPATCH_MAX_CLAIMED_BYTES. */
class ByteBudget {
  private holding = 0
  // Mean bytes of the batches last claimed: the next claim asks only for what the budget left can
  // hold, so its candidate window (payloads Postgres reads to measure) stays near what it takes.
  private perBatch = 0

  constructor(private readonly max: number) {}

  held(): number {
    return this.holding
  }

  /** Mean bytes of the batches last claimed (0 before the first claim). */
  meanBatch(): number {
    return this.perBatch
  }

  left(): number {
    return Math.max(0, this.max - this.holding)
  }

  /** Batches worth asking for: at least one while nothing is held, so an oversized batch still moves. */
  batchesThatFit(): number {
    const room = this.perBatch > 0 ? Math.floor((this.max - this.holding) / this.perBatch) : Number.POSITIVE_INFINITY
    return this.holding === 0 ? Math.max(1, room) : room
  }

  claimed(batches: readonly ClaimedBatch[]): void {
    const sum = batches.reduce((n, b) => n + b.bytes, 0)
    this.holding += sum
    if (batches.length > 0) this.perBatch = sum / batches.length
  }

  freed(batch: ClaimedBatch): void {
    this.holding -= batch.bytes
  }
}

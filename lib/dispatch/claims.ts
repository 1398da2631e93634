import type pg from 'pg'
import type { ClaimedBatch, ClaimResult } from '../db/claim.js'
import { releaseClaims } from '../db/release.js'
import { ByteBudget } from './byte-budget.js'
import { judgeClaim, planClaim, type AfterClaim, type ClaimBook, type ClaimPlan } from './claim-plan.js'
import { claimOffered } from './claim-statements.js'
import { checkedTransition, type ClaimQueueState } from './claim-state.js'
import type { ResolvedTarget } from './resolve.js'
import { EmptyTargets } from './empty-targets.js'
import { queueDepth, QueuedClaims, queueEntries, type Claimed } from './queued-claims.js'
import { TargetWaits } from './target-waits.js'

/** What {@link ClaimQueue.next} hands a worker: a batch to deliver, `again` (ask once more), or `empty`. */
export type Next = Claimed | 'again' | 'empty'

/** What a claim queue is built with, once per drain. */
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

/**
 * Claimed batches, queued ahead of the workers and handed out fairly. One claim statement at a time
 * refills the queue before it runs dry, within a byte budget (DISPATCH_MAX_CLAIMED_BYTES) and a cap
 * per target, so a slow or dead target cannot fill it alone. A worker gets the first queued batch of a
 * target below its share of the workers (the concurrency over the targets with work); claims whose
 * time or lease ran short go back to the database unattempted. Where the queue is (claiming, idle,
 * stopped, …) is one value, {@link ClaimQueueState}, changed only by {@link ClaimQueue.to}.
 */
export class ClaimQueue {
  private readonly queue = new QueuedClaims()
  private readonly runnable: ResolvedTarget[]
  private readonly bytes: ByteBudget
  private readonly waits = new TargetWaits()
  private readonly empty = new EmptyTargets()
  /** The above and the queue's depth, as claim-plan.ts reads them. */
  private readonly book: ClaimBook
  private current: ClaimQueueState = 'ready'
  /** The claim under way: set exactly while the state is `claiming` or `stopping`. */
  private claiming: Promise<void> | undefined
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
    this.bytes = new ByteBudget(input.maxClaimedBytes)
    this.book = {
      queue: this.queue,
      bytes: this.bytes,
      waits: this.waits,
      empty: this.empty,
      ...queueDepth(this.runnable, input.concurrency),
    }
  }

  /** Where the queue is now (lib/dispatch/claim-state.ts). */
  get state(): ClaimQueueState {
    return this.current
  }

  /** The first claim failure, if any: the drain stops on it. */
  get error(): unknown {
    return this.failure
  }

  /** The next batch for a worker, after checking that its time and lease still allow a delivery. */
  async next(): Promise<Next> {
    if (this.current === 'failed') return 'empty'
    void this.refill()
    const next = this.pick()
    if (!next) {
      const pending = this.claiming ?? this.refill()
      if (pending) {
        await pending
        return 'again'
      }
      const any = this.queue.takeFirst()
      if (!any) return 'empty'
      return this.checked(any)
    }
    return this.checked(next)
  }

  /** Marks a batch handed out by {@link next} as done: its bytes are free; once no delivery is under way, another claim is worth making. */
  finished(c: Claimed): void {
    this.queue.finished(c)
    this.bytes.freed(c.batch)
    if (this.delivering === 0) this.changed()
    else if (this.current === 'exhausted') this.to('ready')
  }

  /** Stops claiming and hands every queued claim back at once (a drain ending, or yielding its slice). */
  async stop(): Promise<void> {
    if (this.current === 'claiming') this.to('stopping')
    else if (this.current === 'ready' || this.current === 'idle' || this.current === 'exhausted') this.to('stopped')
    await this.claiming
    if (this.queue.length > 0) await this.release(this.queue.takeAll())
  }

  /** Hands the queued claims of one target back at once (the circuit breaker just paused it: only probes reach it now). */
  async releaseTarget(target: string): Promise<void> {
    const taken = this.queue.take(c => c.target.name === target)
    if (taken.length > 0) await this.release(taken)
  }

  /**
   * Holds a target for `ms` (its receiver answered 429 or 503 with Retry-After): its queued claims go
   * back at once, unattempted, and none is handed out or claimed in this drain until then. Other drains
   * see the hold once the outcome is recorded (actions_target_health.hold_until).
   */
  async holdTarget(target: string, ms: number): Promise<void> {
    this.waits.hold(target, ms)
    await this.releaseTarget(target)
  }

  /** Outcomes of these targets were just written: a target its maxInFlight cut is worth a claim at once. */
  recorded(rows: ReadonlyArray<{ target: string }>): void {
    if (this.waits.slotsFreed(rows, this.input.targets)) this.wake()
  }

  /** Ms until a target its caps cut is worth claiming for again, if one is; the drain waits for it rather than end. */
  nextCapMs(): number | undefined {
    return this.waits.nextCapMs()
  }

  /** Batches handed out and not yet finished (counted as they are handed out, before any await). */
  get delivering(): number {
    return this.queue.delivering
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
    if (this.current === 'failed') throw this.failure
    return this.queue.length > 0
  }

  /** The one place the state changes: throws if the table in claim-state.ts does not allow the step. */
  private to(next: ClaimQueueState): void {
    this.current = checkedTransition(this.current, next)
  }

  /** Something may have made a claim worth its statement again: an idle or exhausted queue is ready. */
  private wake(): void {
    if (this.current === 'idle' || this.current === 'exhausted') this.to('ready')
  }

  private changed(): void {
    this.changes++
    this.wake()
  }

  /**
   * The first queued batch of a target below its share of the workers. The targets sharing them are
   * those holding claims and those not yet found without due events. Undefined when every queued
   * batch's target has its share (a claim may bring another target's batch) or nothing is queued.
   */
  private pick(): Claimed | undefined {
    const sharing = this.queue.holders()
    for (const t of this.runnable) if (!this.empty.has(t.name) && this.input.fits(t)) sharing.add(t.name)
    return this.queue.takeBelowShare(Math.ceil(this.input.concurrency / Math.max(1, sharing.size)))
  }

  /** Hands out a claim, or releases it (and the queued claims in the same trouble) when it can no longer be delivered safely. */
  private async checked(next: Claimed): Promise<Next> {
    const fits = this.input.fits
    if (!fits(next.target)) {
      // Out of time for this target: its queued claims go back at once, due now, for the continuation;
      // faster targets go on.
      this.leftForTime = true
      await this.release([next, ...this.queue.take(c => !fits(c.target))])
      return 'again'
    }
    const unsafe = (c: Claimed) => performance.now() - c.claimedAt + c.target.timeoutMs > c.target.leaseMs
    if (unsafe(next)) {
      // Its lease could run out mid-delivery, letting another dispatcher take the events too; claims
      // queued behind a slow target age together, so all that are as old go back in one statement.
      await this.release([next, ...this.queue.take(unsafe)])
      return 'again'
    }
    this.queue.handedOut(next)
    return next
  }

  /** Hands claims back without an attempt; their bytes are free at once, their events claimable once released. */
  private async release(claims: Claimed[]): Promise<void> {
    for (const c of claims) this.bytes.freed(c.batch)
    this.queue.released(claims)
    await releaseClaims(this.input.db, this.input.project, leases(claims.map(c => c.batch)))
    this.changed()
  }

  /** Starts a claim when one is worth making; returns the claim under way, if any. */
  private refill(): Promise<void> | undefined {
    if (this.current !== 'ready') return this.claiming
    const ready = this.runnable.filter(this.input.fits)
    if (ready.length < this.runnable.length) this.leftForTime = true
    const plan = planClaim(this.book, ready)
    if (plan === 'wait') return undefined
    if (plan === 'exhausted') {
      this.to('exhausted')
      return undefined
    }
    this.to('claiming')
    this.claiming = this.claim(ready, plan).catch(e => this.claimFailed(e))
    return this.claiming
  }

  /**
   * A claim's last step, in the same synchronous run as its judgement: a change counted after it
   * (a delivery finishing) must find the queue idle, not a claim about to declare it so.
   */
  private claimEnded(after: AfterClaim): void {
    this.claiming = undefined
    this.to(this.current === 'stopping' ? 'stopped' : after)
  }

  /** A claim failed, or the step after it did (a bug): the state is still the one the claim ran in. */
  private claimFailed(e: unknown): void {
    this.claiming = undefined
    this.failure ??= e
    this.to('failed')
  }

  /** Runs one claim, queues what it took, and moves the queue on to where the claim leaves it. */
  private async claim(ready: readonly ResolvedTarget[], plan: ClaimPlan): Promise<void> {
    await this.input.beforeClaim()
    // Events of held and too slow targets wait, and so do those of targets at their cap; only a target
    // missing from the schema fails.
    const waiting = [...this.input.targets.keys()].filter(name => !plan.offered.some(t => t.name === name))
    const changesBefore = this.changes
    const budgetBytes = this.bytes.left()
    const limits = { waiting, budgetBytes, atLeastOne: this.bytes.held() === 0 }
    const { result: claimed, flow } = await claimOffered(this.input.db, this.input.project, plan.offered, plan.want, limits)
    this.input.onClaimFailures(claimed)
    this.waits.afterClaim(flow, performance.now())
    const { kept, strays } = queueEntries(claimed.batches, ready, flow, t => this.waits.isHeld(t))
    this.bytes.claimed(kept.map(c => c.batch))
    this.queue.add(kept)
    // Batches of a target held meanwhile (a claim asks only for offered targets): their events must not
    // sit in processing until their leases end.
    if (strays.length > 0) {
      await releaseClaims(this.input.db, this.input.project, leases(strays))
      this.changed()
    }
    this.claimEnded(judgeClaim(this.book, claimed, plan, budgetBytes, this.changes !== changesBefore))
  }
}

/** The events of claimed batches, by id and lease, as releaseClaims takes them. */
function leases(batches: readonly ClaimedBatch[]): Array<{ id: string; lease: string }> {
  return batches.flatMap(b => b.events.map(e => ({ id: e.id, lease: e.lease })))
}

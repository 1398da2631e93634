import type { FlowOutcome } from '../db/flow.js'
import type { ResolvedTarget } from './resolve.js'

/**
 * How soon a target cut by its `maxInFlight` is asked again when none of its own deliveries ends
 * first (its requests in flight may be another drain's).
 */
const CAP_RECHECK_MS = 50

/**
 * The targets a claim queue leaves out of its claims for a while, and until when (performance.now()):
 * those a receiver's Retry-After holds (the database holds them for every other drain), and those
 * whose caps cut the last claim (asked again when the caps allow, or at once when a slot frees).
 */
export class TargetWaits {
  private readonly holds = new Map<string, number>()
  private readonly capped = new Map<string, number>()

  /** Holds a target for `ms` from now, or longer when it is held longer already. */
  hold(target: string, ms: number): void {
    this.holds.set(target, Math.max(this.holds.get(target) ?? 0, performance.now() + ms))
  }

  /** Whether a Retry-After holds the target now; a hold that ran out is forgotten. */
  isHeld(target: string): boolean {
    const until = this.holds.get(target)
    if (until === undefined) return false
    if (until > performance.now()) return true
    this.holds.delete(target)
    return false
  }

  /** Whether the target's caps cut the last claim that asked for it (it has more due). */
  isCapped(target: string): boolean {
    return this.capped.has(target)
  }

  /** Whether the target may be offered to a claim at `now`: neither held nor waiting for its caps. */
  isOpen(target: string, now: number): boolean {
    return !this.isHeld(target) && (this.capped.get(target) ?? 0) <= now
  }

  /** Takes in what a claim of capped targets found: which its caps cut, and when each is worth asking again. */
  afterClaim(flow: ReadonlyMap<string, FlowOutcome>, claimedAt: number): void {
    for (const [name, f] of flow) {
      if (!f.capped) this.capped.delete(name)
      else this.capped.set(name, claimedAt + (f.capped.by === 'rate' ? f.capped.inMs : CAP_RECHECK_MS))
    }
  }

  /**
   * Outcomes of these targets were just written: a target its maxInFlight cut has a request fewer in
   * flight (the database counts a request until its record), so it is worth a claim at once. True
   * when some target is.
   */
  slotsFreed(rows: ReadonlyArray<{ target: string }>, targets: ReadonlyMap<string, ResolvedTarget>): boolean {
    // Most drains have no capped target: no Set per record then.
    if (this.capped.size === 0) return false
    let freed = false
    for (const name of new Set(rows.map(r => r.target))) {
      if (!this.capped.has(name) || targets.get(name)?.maxInFlight === undefined) continue
      this.capped.set(name, performance.now())
      freed = true
    }
    return freed
  }

  /** Ms until a target its caps cut is worth claiming for again, if one is. */
  nextCapMs(): number | undefined {
    if (this.capped.size === 0) return undefined
    return Math.max(0, Math.min(...this.capped.values()) - performance.now())
  }
}

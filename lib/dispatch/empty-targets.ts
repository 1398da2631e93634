import type { TargetClaimConfig } from '../db/claim.js'

/**
 * How long a target the claim found nothing due for is left out of the claims made only for it: a
 * drain asks again this often, so a target whose events become due mid-drain joins within a second.
 */
const EMPTY_RECHECK_MS = 1_000

/**
 * The targets a claim queue's claims found without due events, and when (performance.now()). Such a
 * target has no share of the workers and starts no early claim until EMPTY_RECHECK_MS have passed;
 * a target not in here was not asked yet, or had work.
 */
export class EmptyTargets {
  private readonly at = new Map<string, number>()

  /** Whether the last claim that asked for the target found nothing due for it. */
  has(target: string): boolean {
    return this.at.has(target)
  }

  /** Whether the target may have due events nobody claimed: never found empty, or not for EMPTY_RECHECK_MS. */
  worthAsking(target: string, now: number): boolean {
    return now - (this.at.get(target) ?? -Infinity) >= EMPTY_RECHECK_MS
  }

  /**
   * Takes in what a claim found: a target that got fewer batches than it could take has nothing more
   * due now, unless the claim may hide more (`mayHideMore`: cut at its batch count, at a target's cap,
   * or by the byte budget) or the target's caps cut it (`capped`: it has more, asked when they allow).
   * A target that got batches had work.
   */
  afterClaim(
    offered: readonly TargetClaimConfig[],
    got: ReadonlyMap<string, number>,
    mayHideMore: boolean,
    capped: (target: string) => boolean,
  ): void {
    const now = performance.now()
    for (const t of offered) {
      const n = got.get(t.name) ?? 0
      if (capped(t.name)) this.at.delete(t.name)
      else if (!mayHideMore && n < t.maxBatches) this.at.set(t.name, now)
      else if (n > 0) this.at.delete(t.name)
    }
  }
}

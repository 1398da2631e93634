import type pg from 'pg'
import { claimBatches, type ClaimLimits, type ClaimResult, type TargetClaimConfig } from '../db/claim.js'
import { claimWithCaps, isCapped, type FlowOutcome } from '../db/flow.js'

/** What one claim of a claim queue took, and what the caps said of each capped target it asked for. */
export type OfferedClaim = { result: ClaimResult; flow: Map<string, FlowOutcome> }

/**
 * Claims up to `want` batches of the offered targets: one claim statement for the uncapped ones and,
 * when capped ones are offered, a transaction that holds those to their caps (lib/db/flow.ts). A
 * capped target's claims run one at a time across drains, and the uncapped ones must not wait for
 * that. Each leaves the other's targets waiting; the capped claim gets what the plain one left of the
 * batch count and the byte budget.
 */
export async function claimOffered(
  db: pg.Pool,
  project: string,
  offered: readonly TargetClaimConfig[],
  want: number,
  limits: ClaimLimits,
): Promise<OfferedClaim> {
  const capped = offered.filter(isCapped)
  const free = offered.filter(t => !isCapped(t))
  const names = (ts: readonly TargetClaimConfig[]) => ts.map(t => t.name)
  const plain =
    free.length === 0
      ? undefined
      : await claimBatches(db, project, free, want, { ...limits, waiting: [...limits.waiting, ...names(capped)] })
  if (capped.length === 0) return { result: plain ?? { batches: [], unknownTarget: [], spent: [], lost: 0 }, flow: new Map() }
  const taken = plain?.batches.reduce((n, b) => n + b.bytes, 0) ?? 0
  const { result, flow } = await claimWithCaps(db, project, capped, Math.max(1, want - (plain?.batches.length ?? 0)), {
    ...limits,
    waiting: [...limits.waiting, ...names(free)],
    budgetBytes: Math.max(0, limits.budgetBytes - taken),
    atLeastOne: limits.atLeastOne && !plain?.batches.length,
  })
  if (!plain) return { result, flow }
  return {
    result: {
      batches: [...plain.batches, ...result.batches],
      unknownTarget: [...plain.unknownTarget, ...result.unknownTarget],
      spent: [...plain.spent, ...result.spent],
      lost: plain.lost + result.lost,
    },
    flow,
  }
}

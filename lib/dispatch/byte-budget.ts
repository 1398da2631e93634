import type { ClaimedBatch } from '../db/claim.js'

/** Payload bytes held in claimed events (queued and in flight) against DISPATCH_MAX_CLAIMED_BYTES. */
export class ByteBudget {
  private holding = 0
  // Mean bytes of the batches last claimed: the next claim asks only for what the budget left can
  // hold, so its candidate window (payloads Postgres reads to measure) stays near what it takes.
  private perBatch = 0

  constructor(private readonly max: number) {}

  /** Bytes held now. */
  held(): number {
    return this.holding
  }

  /** Mean bytes of the batches last claimed (0 before the first claim). */
  meanBatch(): number {
    return this.perBatch
  }

  /** Bytes a claim may still take. */
  left(): number {
    return Math.max(0, this.max - this.holding)
  }

  /** Batches worth asking for: at least one while nothing is held, so an oversized batch still moves. */
  batchesThatFit(): number {
    const room = this.perBatch > 0 ? Math.floor((this.max - this.holding) / this.perBatch) : Number.POSITIVE_INFINITY
    return this.holding === 0 ? Math.max(1, room) : room
  }

  /** Counts the batches a claim took. */
  claimed(batches: readonly ClaimedBatch[]): void {
    const sum = batches.reduce((n, b) => n + b.bytes, 0)
    this.holding += sum
    if (batches.length > 0) this.perBatch = sum / batches.length
  }

  /** Frees a batch's bytes (delivered, or handed back). */
  freed(batch: ClaimedBatch): void {
    this.holding -= batch.bytes
  }

  /**
   * Whether the byte budget may have cut a claim that took `taken` bytes out of `budgetBytes`: one
   * more batch as large as the largest taken (or the mean, when that is larger) would not have fitted.
   */
  mayHaveCut(batches: readonly ClaimedBatch[], budgetBytes: number): boolean {
    let taken = 0
    let largest = this.perBatch
    for (const b of batches) {
      taken += b.bytes
      if (b.bytes > largest) largest = b.bytes
    }
    return taken + largest > budgetBytes
  }
}

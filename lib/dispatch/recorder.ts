import type { Queryable } from '../db/pool.js'
import { recordAttempts, type AttemptRecord, type RecordedRow } from '../db/record.js'
import { progressWriter } from '../db/progress.js'

/**
 * Collects outcomes from concurrent deliveries and writes them with as few statements as possible:
 * one write runs at a time, and everything that arrived meanwhile goes into the next one.
 */
export function createRecorder(db: Queryable, onRecorded: (rows: RecordedRow[], records: ReadonlyMap<string, AttemptRecord>) => void) {
  let pending: AttemptRecord[] = []
  let running: Promise<void> | undefined
  let failure: unknown
  // Recorded outcomes are dispatch's progress: the sweeper's heartbeat reads it (DESIGN.md section 6).
  const progress = progressWriter(db)

  const run = async () => {
    while (pending.length > 0) {
      const batch = pending
      pending = []
      const rows = await recordAttempts(db, batch)
      onRecorded(rows, new Map(batch.map(r => [r.id, r])))
      await progress(rows)
    }
  }
  const start = () => {
    running ??= run().catch(e => { failure ??= e }).finally(() => { running = undefined })
  }
  return {
    /** Queues outcomes for writing; throws if an earlier write failed. */
    add(records: AttemptRecord[]): void {
      if (failure) throw failure
      pending.push(...records)
      start()
    },
    /** Outcomes queued or being written. */
    backlog: () => pending.length + (running ? 1 : 0),
    /** Waits until everything queued is written; throws the first write failure. */
    async flush(): Promise<void> {
      while (running) await running
      if (failure) throw failure
    },
  }
}

// What one record statement adds to the per-target trend (lib/db/trends.ts): summed in memory from
// the rows it changed, so the rollup costs one small upsert per record statement, never one per event.
import type { AttemptRecord, RecordedRow } from '../db/record.js'
import { bucketOf, PROJECT_SERIES, TREND_BUCKETS_MS, type TrendAdd } from '../db/trends.js'

/**
 * The additions of one record write, per target and per project. Only rows the statement changed count (an attempt whose lease
 * was lost is not the record's). A request is one batch (`batch`, or each record alone without one),
 * its duration the batch's.
 */
export function trendAdds(rows: readonly RecordedRow[], written: ReadonlyMap<string, AttemptRecord>): TrendAdd[] {
  const byTarget = new Map<string, TrendAdd>()
  const batches = new Set<string>()
  for (const row of rows) {
    const record = written.get(row.id)
    if (!record) continue
    const key = `${record.project}\u0000${record.target}`
    let add = byTarget.get(key)
    if (!add) {
      add = {
        project: record.project,
        target: record.target,
        requests: 0,
        delivered: 0,
        failedAttempts: 0,
        eventsFailed: 0,
        durationCounts: new Array<number>(TREND_BUCKETS_MS.length + 1).fill(0),
      }
      byTarget.set(key, add)
    }
    const batch = record.batch === undefined ? `id:${record.id}` : `${key}\u0000${record.batch}`
    if (!batches.has(batch)) {
      batches.add(batch)
      add.requests++
      const b = bucketOf(record.durationMs)
      add.durationCounts[b] = (add.durationCounts[b] ?? 0) + 1
    }
    if (row.state === 'succeed') add.delivered++
    if (!record.outcome.ok) add.failedAttempts++
    if (row.state === 'failed') add.eventsFailed++
  }
  // Each project's own series (PROJECT_SERIES): the sum of its targets' additions.
  const projects = new Map<string, TrendAdd>()
  for (const add of byTarget.values()) {
    const sum = projects.get(add.project)
    if (!sum) projects.set(add.project, { ...add, target: PROJECT_SERIES, durationCounts: [...add.durationCounts] })
    else {
      sum.requests += add.requests
      sum.delivered += add.delivered
      sum.failedAttempts += add.failedAttempts
      sum.eventsFailed += add.eventsFailed
      add.durationCounts.forEach((n, i) => (sum.durationCounts[i] = (sum.durationCounts[i] ?? 0) + n))
    }
  }
  return [...byTarget.values(), ...projects.values()]
}

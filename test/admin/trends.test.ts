import { describe, expect, it } from 'vitest'
import { quantileMs, trendsJson } from '../../lib/admin/rest/trends.js'
import type { AttemptRecord, RecordedRow } from '../../lib/db/record.js'
import { bucketOf, TREND_BUCKETS_MS, type TrendRow } from '../../lib/db/trends.js'
import { trendAdds } from '../../lib/dispatch/trend-rollup.js'

const counts = (pairs: Array<[number, number]>) => {
  const c = new Array<number>(TREND_BUCKETS_MS.length + 1).fill(0)
  for (const [b, n] of pairs) c[b] = n
  return c
}

describe('the duration buckets', () => {
  it('put a request in the first bucket whose bound holds it, and past the last bound in the open one', () => {
    expect(bucketOf(0)).toBe(0)
    expect(bucketOf(5)).toBe(0)
    expect(bucketOf(5.1)).toBe(1)
    expect(bucketOf(60_000)).toBe(TREND_BUCKETS_MS.length - 1)
    expect(bucketOf(60_001)).toBe(TREND_BUCKETS_MS.length)
  })

  it('read p50 and p99 as the bound of the bucket holding them; none without requests', () => {
    // 98 fast (≤ 10 ms), 2 slow (≤ 1 s): the median is fast, the 99th percentile slow.
    const c = counts([
      [1, 98],
      [7, 2],
    ])
    expect(quantileMs(c, 0.5)).toBe(10)
    expect(quantileMs(c, 0.98)).toBe(10)
    expect(quantileMs(c, 0.99)).toBe(1000)
    expect(quantileMs(counts([]), 0.5)).toBeNull()
    // The open bucket reads as the last bound.
    expect(quantileMs(counts([[TREND_BUCKETS_MS.length, 1]]), 0.99)).toBe(60_000)
  })
})

const record = (id: string, target: string, ok: boolean, batch: number, durationMs: number): AttemptRecord => ({
  id,
  lease: 'l',
  project: 'p',
  target,
  attempts: 0,
  batch,
  outcome: ok ? { ok: true, code: 200 } : { ok: false, code: 500, errorMessage: 'x' },
  durationMs,
  maxAttempts: 2,
  initialRepeatIntervalMs: 1000,
})
const row = (id: string, target: string, state: RecordedRow['state']): RecordedRow => ({
  id,
  state,
  num_retries: 1,
  target,
  trigger: 't',
  held: false,
  target_paused: null,
  target_resumed: false,
  keyed: false,
})

describe('what a record write adds to the trend', () => {
  it('counts requests per batch, deliveries, failed attempts and events failed per target, and their sum for the project', () => {
    const records = [
      record('a1', 'a', true, 1, 7),
      record('a2', 'a', true, 1, 7),
      record('a3', 'a', false, 2, 300),
      record('b1', 'b', false, 3, 40),
      // Recorded by nobody (its lease was lost): not the record's.
      record('b2', 'b', true, 4, 40),
    ]
    const rows = [row('a1', 'a', 'succeed'), row('a2', 'a', 'succeed'), row('a3', 'a', 'retrying'), row('b1', 'b', 'failed')]
    const adds = trendAdds(rows, new Map(records.map(r => [r.id, r])))
    const pick = (t: string) => adds.find(a => a.target === t)
    expect(pick('a')).toMatchObject({ requests: 2, delivered: 2, failedAttempts: 1, eventsFailed: 0 })
    expect(pick('a')?.durationCounts[bucketOf(7)]).toBe(1)
    expect(pick('a')?.durationCounts[bucketOf(300)]).toBe(1)
    expect(pick('b')).toMatchObject({ requests: 1, delivered: 0, failedAttempts: 1, eventsFailed: 1 })
    expect(pick('')).toMatchObject({ project: 'p', requests: 3, delivered: 2, failedAttempts: 2, eventsFailed: 1 })
    expect(pick('')?.durationCounts.reduce((x, y) => x + y, 0)).toBe(3)
  })
})

describe('the trends answer', () => {
  it('gives every target named a series, empty when it made no request, and the project series as stored', () => {
    const minute = new Date('2026-01-01T10:00:00Z')
    const r = (target: string, delivered: number): TrendRow => ({
      target,
      minute,
      requests: 1,
      delivered,
      failed_attempts: 0,
      events_failed: 0,
      duration_counts: counts([[2, 1]]),
    })
    const body = trendsJson([r('a', 3)], [r('', 3)], ['a', 'idle'], minute, 2)
    expect(body.targets).toEqual([
      {
        target: 'a',
        points: [{ minute: minute.toISOString(), requests: 1, delivered: 3, failedAttempts: 0, eventsFailed: 0, p50Ms: 25, p99Ms: 25 }],
      },
      { target: 'idle', points: [] },
    ])
    expect(body.project.points).toHaveLength(1)
    expect(body).toMatchObject({ minutes: 1440, to: minute.toISOString(), targetsLeftOut: 2 })
    expect(Date.parse(body.to) - Date.parse(body.from)).toBe(1439 * 60_000)
  })
})

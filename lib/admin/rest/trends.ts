// GET …/trends: each target's last 24 h per minute (deliveries, failed attempts, events failed,
// request-duration p50 and p99) from the recorder's rollup (lib/db/trends.ts), and the project's sum.
import { z } from 'zod'
import { readTrends, TREND_BUCKETS_MS, TREND_MINUTES, type TrendRow } from '../../db/trends.js'
import type { Route, RouteContext } from '../types.js'
import { nameSchema, projectOf, queryOf } from './common.js'

/** One minute of a series; minutes without a request are left out (read them as zeros). */
export type TrendPointJson = {
  minute: string
  requests: number
  delivered: number
  failedAttempts: number
  eventsFailed: number
  /** Request duration quantiles in ms: the upper bound of the bucket holding them (null without requests). */
  p50Ms: number | null
  p99Ms: number | null
}

/** A series: one target's, or the project's (`target: null`, every target's minutes merged). */
export type TrendSeriesJson = { target: string | null; points: TrendPointJson[] }

/** The answer: the window, its buckets, and the series. */
export type TrendsJson = {
  /** The first and the last minute of the window (the database's clock), and its length. */
  from: string
  to: string
  minutes: number
  /** Upper bounds of the duration buckets the quantiles are read from; beyond the last, the last is shown. */
  bucketsMs: readonly number[]
  project: TrendSeriesJson
  targets: TrendSeriesJson[]
}

/**
 * The q-quantile of requests counted per bucket, as the bucket's upper bound (the last, open bucket
 * reads as the last bound): exact to the bucket, which is all a per-minute rollup keeps.
 */
export function quantileMs(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0)
  if (total === 0) return null
  const rank = Math.max(1, Math.ceil(q * total))
  let seen = 0
  for (const [i, n] of counts.entries()) {
    seen += n
    if (seen >= rank) return TREND_BUCKETS_MS[Math.min(i, TREND_BUCKETS_MS.length - 1)] ?? null
  }
  return TREND_BUCKETS_MS.at(-1) ?? null
}

type Minute = Omit<TrendRow, 'target' | 'minute'>

const point = (minute: Date, m: Minute): TrendPointJson => ({
  minute: minute.toISOString(),
  requests: m.requests,
  delivered: m.delivered,
  failedAttempts: m.failed_attempts,
  eventsFailed: m.events_failed,
  p50Ms: quantileMs(m.duration_counts, 0.5),
  p99Ms: quantileMs(m.duration_counts, 0.99),
})

/** The series of the rows (ordered by target, minute), and their sum per minute. */
export function trendsJson(rows: readonly TrendRow[], now: Date): TrendsJson {
  const byTarget = new Map<string, TrendPointJson[]>()
  const total = new Map<number, Minute>()
  for (const r of rows) {
    let points = byTarget.get(r.target)
    if (!points) byTarget.set(r.target, (points = []))
    points.push(point(r.minute, r))
    const at = r.minute.getTime()
    const sum = total.get(at)
    total.set(
      at,
      sum
        ? {
            requests: sum.requests + r.requests,
            delivered: sum.delivered + r.delivered,
            failed_attempts: sum.failed_attempts + r.failed_attempts,
            events_failed: sum.events_failed + r.events_failed,
            duration_counts: sum.duration_counts.map((n, i) => n + (r.duration_counts[i] ?? 0)),
          }
        : { ...r, duration_counts: [...r.duration_counts] },
    )
  }
  const minutes = [...total].sort(([a], [b]) => a - b)
  return {
    from: new Date(now.getTime() - (TREND_MINUTES - 1) * 60_000).toISOString(),
    to: now.toISOString(),
    minutes: TREND_MINUTES,
    bucketsMs: TREND_BUCKETS_MS,
    project: { target: null, points: minutes.map(([at, m]) => point(new Date(at), m)) },
    targets: [...byTarget].map(([target, points]) => ({ target, points })),
  }
}

const trendsQuery = z.object({ target: nameSchema.optional() }).strict()

async function trends(ctx: RouteContext) {
  const project = projectOf(ctx)
  const q = queryOf(ctx, trendsQuery)
  const { rows, now } = await readTrends(ctx.deps.db, project, q.target)
  return { status: 200, body: trendsJson(rows, now) }
}

/** The trends route. */
export const trendRoutes: Route[] = [{ method: 'GET', path: '/v1/projects/:project/trends', need: 'view', handle: trends }]

// GET …/trends: each target's last 24 h per minute (deliveries, failed attempts, events failed,
// request-duration p50 and p99) from the recorder's rollup (lib/db/trends.ts), and the project's sum.
import { z } from 'zod'
import { listTargetHealth } from '../../db/pauses.js'
import { getCurrentSchema } from '../../db/schemas.js'
import { MAX_TREND_TARGETS, readTrends, TREND_BUCKETS_MS, TREND_MINUTES, type TrendRow } from '../../db/trends.js'
import type { Route, RouteContext } from '../types.js'
import { nameSchema, notFound, projectOf, queryOf } from './common.js'

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
  /** One series per target (of the schema, and any with a health row), at most MAX_TREND_TARGETS, by name. */
  targets: TrendSeriesJson[]
  /** Targets past MAX_TREND_TARGETS, whose series this answer leaves out (`?target=` reads one). */
  targetsLeftOut: number
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

const point = (minute: Date, m: TrendRow): TrendPointJson => ({
  minute: minute.toISOString(),
  requests: m.requests,
  delivered: m.delivered,
  failedAttempts: m.failed_attempts,
  eventsFailed: m.events_failed,
  p50Ms: quantileMs(m.duration_counts, 0.5),
  p99Ms: quantileMs(m.duration_counts, 0.99),
})

/** The series of each target (rows ordered by target, minute; every target named gets one) and the project's sum. */
export function trendsJson(
  rows: readonly TrendRow[],
  total: readonly TrendRow[],
  targets: readonly string[],
  now: Date,
  leftOut = 0,
): TrendsJson {
  const byTarget = new Map<string, TrendPointJson[]>(targets.map(t => [t, []]))
  for (const r of rows) byTarget.get(r.target)?.push(point(r.minute, r))
  return {
    from: new Date(now.getTime() - (TREND_MINUTES - 1) * 60_000).toISOString(),
    to: now.toISOString(),
    minutes: TREND_MINUTES,
    bucketsMs: TREND_BUCKETS_MS,
    project: { target: null, points: total.map(r => point(r.minute, r)) },
    targets: [...byTarget].map(([target, points]) => ({ target, points })),
    targetsLeftOut: leftOut,
  }
}

const trendsQuery = z
  .object({
    target: nameSchema.optional(),
    /** `project`: the project's series only (the Projects page), no target's. */
    series: z.enum(['all', 'project']).default('all'),
  })
  .strict()

async function trends(ctx: RouteContext) {
  const project = projectOf(ctx)
  const q = queryOf(ctx, trendsQuery)
  const current = await getCurrentSchema(ctx.deps.db, project)
  if (!current) throw notFound('no actions schema is stored for this project')
  const health = await listTargetHealth(ctx.deps.db, project)
  const all = q.target ? [q.target] : [...new Set([...Object.keys(current.schema.targets), ...health.map(h => h.target)])].sort()
  const shown = q.series === 'project' ? [] : all.slice(0, MAX_TREND_TARGETS)
  const { rows, total, now } = await readTrends(ctx.deps.db, project, shown)
  return { status: 200, body: trendsJson(rows, total, shown, now, all.length - shown.length) }
}

/** The trends route. */
export const trendRoutes: Route[] = [{ method: 'GET', path: '/v1/projects/:project/trends', need: 'view', handle: trends }]

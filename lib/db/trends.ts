// The per-target trend rollup (migration 023): what the recorder adds per minute, what the console's
// charts read back, and the sweeper's trim. A minute is the database's: date_trunc('minute', now()).
import type { Queryable } from './pool.js'
import { named } from './sql.js'

/**
 * Upper bounds (ms, inclusive) of the request-duration buckets; a last bucket holds everything longer.
 * Roughly ×2–2.5 apart from 5 ms to a minute: a quantile read from them is off by at most one bucket's
 * width, which is what a chart of "is it slowing down" needs, and a row stays 14 integers.
 */
export const TREND_BUCKETS_MS: readonly number[] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000]

/** The minutes a trend covers: the last 24 h. */
export const TREND_MINUTES = 1440

/** One target's additions to the current minute. */
export type TrendAdd = {
  project: string
  target: string
  requests: number
  delivered: number
  failedAttempts: number
  eventsFailed: number
  /** Requests per bucket of TREND_BUCKETS_MS, one more entry for "longer". */
  durationCounts: number[]
}

/** The bucket a request of `ms` falls in. */
export function bucketOf(ms: number): number {
  const i = TREND_BUCKETS_MS.findIndex(bound => ms <= bound)
  return i === -1 ? TREND_BUCKETS_MS.length : i
}

/**
 * Adds to the current minute of each target, one row per target, merged into what concurrent
 * recorders wrote (bucket by bucket). Rows go in (project, target) order, so two recorders' upserts
 * lock shared rows in one order and cannot deadlock.
 */
export const TREND_ADD = named<{
  project: string[]
  target: string[]
  requests: number[]
  delivered: number[]
  failed_attempts: number[]
  events_failed: number[]
  duration_counts: string[]
}>()(
  ['project', 'target', 'requests', 'delivered', 'failed_attempts', 'events_failed', 'duration_counts'],
  `INSERT INTO actions_target_minute AS t (project, target, minute, requests, delivered, failed_attempts, events_failed, duration_counts)
   SELECT a.project, a.target, date_trunc('minute', now()), a.requests, a.delivered, a.failed_attempts, a.events_failed, a.duration_counts::int[]
   FROM unnest($project::text[], $target::text[], $requests::int[], $delivered::int[], $failed_attempts::int[], $events_failed::int[],
               $duration_counts::text[]) AS a(project, target, requests, delivered, failed_attempts, events_failed, duration_counts)
   ORDER BY a.project, a.target
   ON CONFLICT (project, target, minute) DO UPDATE SET
     requests = t.requests + excluded.requests,
     delivered = t.delivered + excluded.delivered,
     failed_attempts = t.failed_attempts + excluded.failed_attempts,
     events_failed = t.events_failed + excluded.events_failed,
     duration_counts = ARRAY(SELECT coalesce(x, 0) + coalesce(y, 0) FROM unnest(t.duration_counts, excluded.duration_counts) AS u(x, y))`,
)

/** Writes the additions (nothing when there are none). */
export async function addTrends(db: Queryable, adds: readonly TrendAdd[]): Promise<void> {
  if (adds.length === 0) return
  const sorted = [...adds].sort((a, b) => (a.project === b.project ? cmp(a.target, b.target) : cmp(a.project, b.project)))
  await db.query({
    name: 'actions_trend_add',
    text: TREND_ADD.text,
    values: TREND_ADD.values({
      project: sorted.map(a => a.project),
      target: sorted.map(a => a.target),
      requests: sorted.map(a => a.requests),
      delivered: sorted.map(a => a.delivered),
      failed_attempts: sorted.map(a => a.failedAttempts),
      events_failed: sorted.map(a => a.eventsFailed),
      duration_counts: sorted.map(a => `{${a.durationCounts.join(',')}}`),
    }),
  })
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** One stored minute of one target. */
export type TrendRow = {
  target: string
  minute: Date
  requests: number
  delivered: number
  failed_attempts: number
  events_failed: number
  duration_counts: number[]
}

/**
 * Most targets one trends answer carries series for: a day of minutes is 1,440 points a target, so
 * 25 targets keep an answer near a megabyte and a read near 36,000 rows. The rest are named in
 * `targetsLeftOut`; `?target=` reads any one of them.
 */
export const MAX_TREND_TARGETS = 25

/**
 * The minutes of the last 24 h of the given targets of a project, oldest first: one range of the
 * primary key per target, at most TREND_MINUTES rows each.
 */
export const TREND_READ = named<{ project: string; targets: string[]; minutes: number }>()(
  ['project', 'targets', 'minutes'],
  `SELECT target, minute, requests, delivered, failed_attempts, events_failed, duration_counts
   FROM actions_target_minute
   WHERE project = $project AND target = ANY($targets::text[])
     AND minute > date_trunc('minute', now()) - $minutes::int * interval '1 minute'
   ORDER BY target, minute`,
)

/**
 * The project's own series is stored as a target named '' (no target can be: names are never empty),
 * summed by the recorder as it writes its targets' rows, so the Projects page reads 1,440 rows a
 * project, not 1,440 per target.
 */
export const PROJECT_SERIES = ''

/** The targets' rows, the project's series, and the database's current minute. */
export async function readTrends(
  db: Queryable,
  project: string,
  targets: readonly string[],
): Promise<{ rows: TrendRow[]; total: TrendRow[]; now: Date }> {
  const [data, clock] = await Promise.all([
    db.query<TrendRow>(TREND_READ.text, TREND_READ.values({ project, targets: [PROJECT_SERIES, ...targets], minutes: TREND_MINUTES })),
    db.query<{ now: Date }>(`SELECT date_trunc('minute', now()) AS now`),
  ])
  return {
    rows: data.rows.filter(r => r.target !== PROJECT_SERIES),
    total: data.rows.filter(r => r.target === PROJECT_SERIES),
    now: clock.rows[0]?.now ?? new Date(),
  }
}

/**
 * When each of the given targets last made a request: one backward probe of the primary key per
 * target (the trim keeps each target's newest minute, so this reaches back past the day).
 */
export const TREND_LAST = named<{ project: string; targets: string[] }>()(
  ['project', 'targets'],
  `SELECT t.target, (SELECT max(m.minute) FROM actions_target_minute m WHERE m.project = $project AND m.target = t.target) AS minute
   FROM unnest($targets::text[]) AS t(target)`,
)

/** The minute of each target's last request; a target missing from the map never sent one. */
export async function readLastRequests(db: Queryable, project: string, targets: readonly string[]): Promise<Map<string, Date>> {
  const { rows } = await db.query<{ target: string; minute: Date | null }>(
    TREND_LAST.text,
    TREND_LAST.values({ project, targets: [...targets] }),
  )
  return new Map(rows.flatMap(r => (r.minute ? [[r.target, r.minute] as const] : [])))
}

/**
 * Deletes minutes older than the trend's day, keeping each target's newest (when it last sent).
 * Bounded: a sweep deletes at most TREND_TRIM_ROWS rows, so a backlog of old minutes (a sweeper
 * stopped for days) is trimmed over several sweeps, never in one long statement.
 */
export const TREND_TRIM_ROWS = 50_000

export const TREND_TRIM = named<{ minutes: number; max_rows: number }>()(
  ['minutes', 'max_rows'],
  `DELETE FROM actions_target_minute t
   WHERE (t.project, t.target, t.minute) IN (
     SELECT o.project, o.target, o.minute FROM actions_target_minute o
     WHERE o.minute <= date_trunc('minute', now()) - $minutes::int * interval '1 minute'
       AND EXISTS (SELECT 1 FROM actions_target_minute n WHERE n.project = o.project AND n.target = o.target AND n.minute > o.minute)
     LIMIT $max_rows)`,
)

/** Trims old minutes; returns how many rows went. */
export async function trimTrends(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(TREND_TRIM.text, TREND_TRIM.values({ minutes: TREND_MINUTES, max_rows: TREND_TRIM_ROWS }))
  return rowCount ?? 0
}

// What happened lately, for the console's Projects and Targets pages: terminal failures of
// the last 24 h, and each target's delivered-versus-failed outcomes of the last hour. Both are read
// per request, every few seconds while a console is open, so each walks an index over a time window
// and stops at a LIMIT: its cost has a ceiling whatever the table holds.
import type { Queryable } from './pool.js'
import { named } from './sql.js'

/** The window of "failed in the last 24 h" on the Projects page. */
export const FAILED_WINDOW_SECONDS = 86_400

/**
 * Most failed events counted in that window: a project past it shows "10000+" (`failedLast24hCapped`).
 * The count walks actions_event_failed_idx (project, failed_at) WHERE failed_at IS NOT NULL and
 * reads nothing but the index, so the cap bounds the entries read.
 */
export const FAILED_COUNT_CAP = 10_000

/** The window of a target's recent success rate: events resolved in the last hour. */
export const RECENT_WINDOW_SECONDS = 3_600

/**
 * Most resolved events of a project the rates are computed over, newest first: a project delivering
 * more than this in an hour has its rates taken over its latest RECENT_MAX_EVENTS, and a quiet target
 * among busy ones may then show no recent deliveries (`limitReached` says so).
 */
export const RECENT_MAX_EVENTS = 5_000

/** One target's terminal outcomes in the window: delivered (`succeed`) and failed for good. */
export type TargetOutcomes = { succeeded: number; failed: number }

/**
 * The newest resolved events of the project in the window, by target. It walks
 * actions_event_resolved_page_idx (project, resolved_at: migration 023) backwards from now: the window
 * and the project bound the index range, the LIMIT the rows counted. Stopped events were never
 * delivered nor refused: left out.
 */
export const TARGET_OUTCOMES = named<{ project: string; window_s: number; max_events: number }>()(
  ['project', 'window_s', 'max_events'],
  `SELECT target,
          count(*) FILTER (WHERE state = 'succeed')::int AS succeeded,
          count(*) FILTER (WHERE state = 'failed')::int AS failed
   FROM (SELECT target, state FROM actions_event
         WHERE state IN ('succeed', 'failed') AND resolved_at >= now() - $window_s::int * interval '1 second'
           AND project = $project
         ORDER BY resolved_at DESC
         LIMIT $max_events) r
   GROUP BY target`,
)

/** Outcomes by target of one project, and whether the LIMIT cut the window short. */
export async function readTargetOutcomes(
  db: Queryable,
  project: string,
): Promise<{ byTarget: Map<string, TargetOutcomes>; limitReached: boolean }> {
  const { rows } = await db.query<{ target: string } & TargetOutcomes>(
    TARGET_OUTCOMES.text,
    TARGET_OUTCOMES.values({ project, window_s: RECENT_WINDOW_SECONDS, max_events: RECENT_MAX_EVENTS }),
  )
  const counted = rows.reduce((n, r) => n + r.succeeded + r.failed, 0)
  return {
    byTarget: new Map(rows.map(r => [r.target, { succeeded: r.succeeded, failed: r.failed }])),
    limitReached: counted >= RECENT_MAX_EVENTS,
  }
}

/**
 * The failed-in-24-h count as a subquery of the stats statement (lib/db/admin-events.ts), over its
 * `$project`, `$failed_window_s` (FAILED_WINDOW_SECONDS) and `$failed_cap` (FAILED_COUNT_CAP).
 */
export const FAILED_RECENT_SQL = `SELECT count(*)::int AS failed_recent
   FROM (SELECT 1 FROM actions_event
         WHERE project = $project AND failed_at IS NOT NULL
           AND failed_at >= now() - $failed_window_s::int * interval '1 second'
         LIMIT $failed_cap) f`

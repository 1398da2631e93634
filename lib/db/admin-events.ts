// The admin API's reads of a project's events: the paginated listing, per-target due
// backlogs and the numbers of GET …/stats. Operator listings of lib/db/operator.ts stay as they are.
import type { EventRow, EventState } from '../events.js'
import { FAILED_COUNT_CAP, FAILED_RECENT_SQL, FAILED_WINDOW_SECONDS } from './admin-recent.js'
import { DUE, unresolved } from './due.js'
import { SHOWN_VISIBLE_AT } from './operator.js'
import type { Queryable } from './pool.js'
import { named } from './sql.js'

/** What a listing row holds: the event without payload and log. */
export type EventSummaryRow = Pick<
  EventRow,
  'id' | 'project' | 'state' | 'target' | 'trigger' | 'num_retries' | 'created_at' | 'last_state_change' | 'visible_at' | 'resolved_at'
> & {
  /** The start of the last log entry's errorMessage (cut in the database), null when there is none. */
  last_error?: string | null
}

/** Where a page starts: after the event changed at `changeUs` (microseconds since the epoch) with id `id`. */
export type EventCursor = { changeUs: bigint; id: string }

/** The listing's filter; every field but the project and the limit may be left out. */
export type EventPageFilter = {
  project: string
  state?: EventState | undefined
  target?: string | undefined
  /** last_state_change >= since (inclusive), when given. */
  since?: Date | undefined
  /** last_state_change < until (exclusive), when given. */
  until?: Date | undefined
  after?: EventCursor | undefined
  limit: number
  /** Characters of the last error fetched per event (a listing never carries a 4 KB response). */
  errorChars: number
}

type PageParams = {
  project: string
  state: EventState | null
  target: string | null
  since: Date | null
  until: Date | null
  after_us: string | null
  after_id: string | null
  limit: number
  error_chars: number
}

// The columns a listing row carries, and its page key: a resolved event's last change is its
// resolution (every statement that resolves an event sets resolved_at and last_state_change to the
// same now()), so `change` is last_state_change for every row, read from the column its branch's
// index orders by.
const LISTED = (change: string) => `id, project, state, target, trigger, num_retries, created_at, last_state_change, ${SHOWN_VISIBLE_AT},
          resolved_at, left(log -> -1 ->> 'errorMessage', $error_chars) AS last_error, ${change} AS change`

// The filter every branch shares, on its own page key.
const FILTERED = (change: string) => `project = $project
     AND ($state::actions_event_state IS NULL OR state = $state::actions_event_state)
     AND ($target::text IS NULL OR target = $target::text)
     AND ($since::timestamptz IS NULL OR ${change} >= $since::timestamptz)
     AND ($until::timestamptz IS NULL OR ${change} < $until::timestamptz)
     AND ($after_us::int8 IS NULL
          OR (${change}, id) < (timestamptz 'epoch' + $after_us::int8 * interval '1 microsecond', $after_id::uuid))`

/**
 * Newest change first, keyset-paginated on (last_state_change, id): a page after the millionth event
 * costs what the first does, and events changing between pages move to the top without shifting the
 * others: no event is skipped or repeated for it. The cursor's time travels as exact microseconds (a
 * JS Date holds only milliseconds). No index may hold last_state_change or state (the claim writes
 * both, and must stay a HOT update: migration 017), so the page is the newest of three branches, each
 * on an index of columns the claim never writes, each stopping at the page's size:
 * - unresolved events (the due index: the project's backlog, read whole and sorted);
 * - failed ones, by failed_at (actions_event_failed_idx), which is their resolution;
 * - other resolved ones, by resolved_at (actions_event_resolved_page_idx, or
 *   actions_event_target_page_idx with a target: migration 023).
 * A branch the state filter rules out is not run. A rare state among many (`stopped` among millions
 * delivered) reads resolved rows until the page fills, under the statement timeout.
 */
export const EVENT_PAGE = named<PageParams>()(
  ['project', 'state', 'target', 'since', 'until', 'after_us', 'after_id', 'limit', 'error_chars'],
  `SELECT id, project, state, target, trigger, num_retries, created_at, last_state_change, visible_at, resolved_at, last_error,
          (extract(epoch FROM change) * 1000000)::int8::text AS change_us
   FROM (
     (SELECT ${LISTED('last_state_change')} FROM actions_event
      WHERE ${unresolved()} AND ($state::actions_event_state IS NULL OR $state::actions_event_state IN ('created', 'retrying', 'processing'))
        AND ${FILTERED('last_state_change')}
      ORDER BY last_state_change DESC, id DESC LIMIT $limit)
     UNION ALL
     (SELECT ${LISTED('failed_at')} FROM actions_event
      WHERE failed_at IS NOT NULL AND ($state::actions_event_state IS NULL OR $state::actions_event_state = 'failed')
        AND ${FILTERED('failed_at')}
      ORDER BY failed_at DESC, id DESC LIMIT $limit)
     UNION ALL
     (SELECT ${LISTED('resolved_at')} FROM actions_event
      WHERE resolved_at IS NOT NULL AND failed_at IS NULL AND ($state::actions_event_state IS NULL OR $state::actions_event_state IN ('succeed', 'stopped'))
        AND ${FILTERED('resolved_at')}
      ORDER BY resolved_at DESC, id DESC LIMIT $limit)
   ) page
   ORDER BY change DESC, id DESC
   LIMIT $limit`,
)

/** One listed event and the cursor that starts the page after it. */
export type PagedEvent = EventSummaryRow & { last_error: string | null; cursor: EventCursor }

/** One page of a project's events (at most `limit`), newest change first; `next` is set when more follow. */
export async function listEventPage(db: Queryable, f: EventPageFilter): Promise<{ events: PagedEvent[]; next: EventCursor | undefined }> {
  // One row past the page says whether another page exists, without a count.
  const { rows } = await db.query<EventSummaryRow & { last_error: string | null; change_us: string }>(
    EVENT_PAGE.text,
    EVENT_PAGE.values({
      project: f.project,
      state: f.state ?? null,
      target: f.target ?? null,
      since: f.since ?? null,
      until: f.until ?? null,
      after_us: f.after ? f.after.changeUs.toString() : null,
      after_id: f.after ? f.after.id : null,
      limit: f.limit + 1,
      error_chars: f.errorChars,
    }),
  )
  const events = rows.slice(0, f.limit).map(({ change_us, ...r }) => ({ ...r, cursor: { changeUs: BigInt(change_us), id: r.id } }))
  return { events, next: rows.length > f.limit ? events.at(-1)?.cursor : undefined }
}

/** Per target of a project: its due events and how long the oldest has been due (the due index, no history). */
export const TARGET_BACKLOG = named<{ project: string }>()(
  ['project'],
  `SELECT target, count(*)::int AS due, coalesce(extract(epoch FROM now() - min(visible_at)), 0)::float8 AS oldest_s
   FROM actions_event WHERE project = $project AND ${DUE}
   GROUP BY target`,
)

/** Due events by target of one project. */
export async function readTargetBacklog(
  db: Queryable,
  project: string,
): Promise<Map<string, { due: number; oldestDueAgeSeconds: number }>> {
  const { rows } = await db.query<{ target: string; due: number; oldest_s: number }>(
    TARGET_BACKLOG.text,
    TARGET_BACKLOG.values({ project }),
  )
  return new Map(rows.map(r => [r.target, { due: r.due, oldestDueAgeSeconds: Math.max(0, r.oldest_s) }]))
}

/**
 * Resolved events the counts by state read at most, newest first: a project holding more has its
 * resolved states counted over its newest COUNTED_RESOLVED_EVENTS (`countsComplete: false`, the counts
 * of succeed, failed and stopped are then lower bounds). Counting 10 million resolved events exactly
 * takes seconds; a console asks every 5 s.
 */
export const COUNTED_RESOLVED_EVENTS = 20_000

/**
 * The project's numbers in one snapshot: unresolved events by state (the due index: the backlog, not
 * history), resolved ones over the newest COUNTED_RESOLVED_EVENTS (actions_event_resolved_page_idx),
 * "due" as the Targets page counts it (every due event, whatever its target; `due_paused` the part at
 * paused targets, which wait for a probe or an operator), the failed events of the last 24 h
 * (lib/db/admin-recent.ts: the failed index, capped), the heartbeat and now.
 */
export const PROJECT_STATS = named<{ project: string; failed_window_s: number; failed_cap: number; counted_resolved: number }>()(
  ['project', 'failed_window_s', 'failed_cap', 'counted_resolved'],
  `SELECT c.counts, r.resolved_counts, r.resolved_read, b.due, b.due_paused, b.oldest_s, f.failed_recent, p.progressed_at, now() AS now
   FROM (SELECT coalesce(jsonb_object_agg(state, n), '{}'::jsonb) AS counts
         FROM (SELECT state, count(*)::int AS n FROM actions_event WHERE project = $project AND ${unresolved()} GROUP BY state) s) c
   CROSS JOIN (SELECT coalesce(jsonb_object_agg(state, n) FILTER (WHERE state IS NOT NULL), '{}'::jsonb) AS resolved_counts,
                      coalesce(sum(n), 0)::int AS resolved_read
               FROM (SELECT state, count(*)::int AS n
                     FROM (SELECT state FROM actions_event WHERE project = $project AND resolved_at IS NOT NULL
                           ORDER BY resolved_at DESC LIMIT $counted_resolved) n
                     GROUP BY state) s) r
   CROSS JOIN (SELECT count(*)::int AS due, count(*) FILTER (WHERE h.target IS NOT NULL)::int AS due_paused,
                      coalesce(extract(epoch FROM now() - min(e.visible_at)), 0)::float8 AS oldest_s
               FROM actions_event e
               LEFT JOIN actions_target_health h ON h.project = e.project AND h.target = e.target AND h.paused_at IS NOT NULL
               WHERE e.project = $project AND ${unresolved('e.')} AND e.visible_at <= now()
                 AND (e.lease_until IS NULL OR e.lease_until <= now())) b
   CROSS JOIN (${FAILED_RECENT_SQL}) f
   LEFT JOIN actions_dispatch_progress p ON p.project = $project`,
)

/** A project's numbers as read, before lib/shapes.ts statsJson shapes them. */
export type ProjectStats = {
  counts: Partial<Record<EventState, number>>
  /** False when the resolved states were counted over the newest COUNTED_RESOLVED_EVENTS only. */
  countsComplete: boolean
  /** Every due event of the project, as the Targets page sums them; `duePaused` of them at paused targets. */
  due: number
  duePaused: number
  oldestDueAgeSeconds: number
  /** Events failed for good in the last 24 h, counted up to FAILED_COUNT_CAP. */
  failedRecent: number
  /** When dispatch last made progress on the project (actions_dispatch_progress), null when never. */
  progressedAt: Date | null
  /** The database's now, so the heartbeat's age is judged by the one clock. */
  now: Date
}

/** What GET …/stats is built from (lib/shapes.ts statsJson). */
export async function readProjectStats(db: Queryable, project: string): Promise<ProjectStats> {
  const { rows } = await db.query<{
    counts: Partial<Record<EventState, number>>
    resolved_counts: Partial<Record<EventState, number>>
    resolved_read: number
    due: number
    due_paused: number
    oldest_s: number
    failed_recent: number
    progressed_at: Date | null
    now: Date
  }>(
    PROJECT_STATS.text,
    PROJECT_STATS.values({
      project,
      failed_window_s: FAILED_WINDOW_SECONDS,
      failed_cap: FAILED_COUNT_CAP,
      counted_resolved: COUNTED_RESOLVED_EVENTS,
    }),
  )
  const r = rows[0]
  if (!r) throw new Error('the stats statement returned no row')
  return {
    counts: { ...r.counts, ...r.resolved_counts },
    countsComplete: r.resolved_read < COUNTED_RESOLVED_EVENTS,
    due: r.due,
    duePaused: r.due_paused,
    oldestDueAgeSeconds: r.oldest_s,
    failedRecent: r.failed_recent,
    progressedAt: r.progressed_at,
    now: r.now,
  }
}

import { DUE } from './due.js'
import type { EventRow, EventState } from '../events.js'
import type { Queryable } from './pool.js'

/** The operator listings (upstream's failed / in-processing / due queries). */
export type Listing = 'failed' | 'processing' | 'due'

const LISTINGS: Record<Listing, string> = {
  // Upstream's failedEvents lists both: an event still retrying has failed at least once.
  // Ordered by the table's own columns (qualified): the listings also select SHOWN_VISIBLE_AT.
  failed: `state IN ('failed', 'retrying') ORDER BY actions_event.last_state_change DESC`,
  processing: `state = 'processing' AND lease_until > now() ORDER BY actions_event.lease_until`,
  due: `${DUE} ORDER BY priority DESC, actions_event.visible_at`,
}

/**
 * `visible_at` as operators read it: when a claim may take the event next, so for a claimed one the
 * end of its lease (kept in `lease_until` since migration 017; `visible_at` stays its due time).
 * `greatest` skips a NULL lease. A later column of the same name wins in node-postgres, so
 * `SELECT *, this` shows this one.
 */
export const SHOWN_VISIBLE_AT = `greatest(visible_at, lease_until) AS visible_at`

/** One line of a listing: no payload, and only the start of the last error. */
export type ListedEvent = Pick<EventRow, 'id' | 'state' | 'target' | 'trigger' | 'num_retries' | 'visible_at'> & {
  /** The first characters of the last log entry's errorMessage, null when there is none. */
  last_error: string | null
  /** Its full length in characters. */
  last_error_chars: number
}

/**
 * Lists a project's events of one kind, newest failures first, due events in claim order. Payloads
 * stay in the database and the last error is cut there to `errorChars`, so a listing stays small
 * whatever receivers answered.
 */
export async function listEvents(
  db: Queryable,
  project: string,
  listing: Listing,
  limit: number,
  errorChars: number,
): Promise<ListedEvent[]> {
  const { rows } = await db.query<ListedEvent>(
    `SELECT id, state, target, trigger, num_retries, ${SHOWN_VISIBLE_AT},
            left(log -> -1 ->> 'errorMessage', $3) AS last_error,
            coalesce(length(log -> -1 ->> 'errorMessage'), 0) AS last_error_chars
     FROM actions_event WHERE project = $1 AND ${LISTINGS[listing]} LIMIT $2`,
    [project, limit, errorChars],
  )
  return rows
}

/**
 * One page of a listing as upstream's GraphQL API pages it (by offset), whole rows (payload and log),
 * in the same selection and order as {@link listEvents}: the API and the CLI list the same ids.
 */
export async function pageEvents(db: Queryable, project: string, listing: Listing, limit: number, offset: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT *, ${SHOWN_VISIBLE_AT} FROM actions_event WHERE project = $1 AND ${LISTINGS[listing]} LIMIT $2 OFFSET $3`,
    [project, limit, offset],
  )
  return rows
}

/** One event of a listing page and the bytes its payload and log take as stored (jsonb as text). */
export type EventSize = { id: string; bytes: number }

/**
 * The ids of one page of a listing (as {@link pageEvents} selects and orders them) with each event's
 * stored payload and log bytes, so an answer's size is known before any payload is read into memory.
 * jsonb's text has a space after every colon and comma, so this is at least the JSON's size.
 */
export async function pageEventSizes(
  db: Queryable,
  project: string,
  listing: Listing,
  limit: number,
  offset: number,
): Promise<EventSize[]> {
  const { rows } = await db.query<{ id: string; bytes: string }>(
    `SELECT id, octet_length(payload::text)::bigint + octet_length(log::text) AS bytes
     FROM actions_event WHERE project = $1 AND ${LISTINGS[listing]} LIMIT $2 OFFSET $3`,
    [project, limit, offset],
  )
  return rows.map(r => ({ id: r.id, bytes: Number(r.bytes) }))
}

/** Whole rows of the project's events `ids`, in the order of `ids` (an id no longer there is left out). */
export async function eventsByIds(db: Queryable, project: string, ids: readonly string[]): Promise<EventRow[]> {
  if (ids.length === 0) return []
  const { rows } = await db.query<EventRow>(
    `SELECT *, ${SHOWN_VISIBLE_AT} FROM actions_event WHERE project = $1 AND id = ANY($2::uuid[])`,
    [project, ids],
  )
  const byId = new Map(rows.map(r => [r.id, r]))
  return ids.flatMap(id => byId.get(id) ?? [])
}

/** An event id that more than one project uses, given without a project: the operator must name one. */
export class AmbiguousEventError extends Error {
  override name = 'AmbiguousEventError'
  constructor(
    readonly id: string,
    readonly projects: string[],
  ) {
    super(`event ${id} exists in ${projects.length} projects; name one (--project)`)
  }
}

/**
 * The project of the event `id` (ids are the project's own: migration 005): `project` itself when
 * given and the event is there, the one project that has the id otherwise, undefined when none has
 * it. Throws {@link AmbiguousEventError} when several do and no project was given.
 */
export async function eventProject(db: Queryable, id: string, project?: string): Promise<string | undefined> {
  const { rows } = await db.query<{ project: string }>(
    'SELECT project FROM actions_event WHERE id = $1 AND ($2::text IS NULL OR project = $2) ORDER BY project LIMIT 3',
    [id, project ?? null],
  )
  if (rows.length > 1)
    throw new AmbiguousEventError(
      id,
      rows.map(r => r.project),
    )
  return rows[0]?.project
}

/** One event of a project with its log, or undefined. */
export async function getEvent(db: Queryable, project: string, id: string): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(`SELECT *, ${SHOWN_VISIBLE_AT} FROM actions_event WHERE id = $1 AND project = $2`, [
    id,
    project,
  ])
  return rows[0]
}

// What an operator's retry and stop write, for one event and in bulk alike. Either ends a lease and
// a terminal failure (migration 017's lease_until and failed_at); a retry makes the event due now.
const REOPEN = `UPDATE actions_event SET
       state = CASE WHEN num_retries = 0 THEN 'created' ELSE 'retrying' END::actions_event_state,
       visible_at = now(), resolved_at = NULL, lease_until = NULL, failed_at = NULL, last_state_change = now()`
const STOP = `UPDATE actions_event SET state = 'stopped', resolved_at = now(), lease_until = NULL, failed_at = NULL, last_state_change = now()`

/** What a single retry or stop found: the state the event had, and whether the statement changed it. */
export type OperatorChange = { found: false } | { found: true; was: EventState; changed: boolean }

// One statement: the state before (for the reason of a refusal) and the change, which re-checks the
// state under the row lock, so an event claimed meanwhile is refused, never changed.
const single = (head: string) => `WITH was AS (SELECT state FROM actions_event WHERE id = $1 AND project = $2),
  changed AS (${head} WHERE id = $1 AND project = $2 AND state = ANY($3::actions_event_state[]) RETURNING 1)
  SELECT was.state::text AS was, EXISTS (SELECT 1 FROM changed) AS changed FROM was`

async function changeOne(db: Queryable, head: string, project: string, id: string, from: readonly EventState[]): Promise<OperatorChange> {
  const { rows } = await db.query<{ was: EventState; changed: boolean }>(single(head), [id, project, from])
  const row = rows[0]
  return row ? { found: true, was: row.was, changed: row.changed } : { found: false }
}

/**
 * Makes an event due now if its state is one of `from`: back to `created` if it was never attempted,
 * else `retrying`. Its attempt count is kept, so a replayed event gets one more attempt (the upstream
 * semantics). Which states may be retried is lib/operate/retry.ts's rule.
 */
export async function retryEvent(db: Queryable, project: string, id: string, from: readonly EventState[]): Promise<OperatorChange> {
  return changeOne(db, REOPEN, project, id, from)
}

/** Stops an event for good (`stopped`, resolved now) if its state is one of `from` (lib/operate/stop.ts's rule). */
export async function stopEvent(db: Queryable, project: string, id: string, from: readonly EventState[]): Promise<OperatorChange> {
  return changeOne(db, STOP, project, id, from)
}

/** Which events a bulk retry or stop changes: one project, optionally one target, one state, a creation window. */
export type BulkFilter = {
  project: string
  target: string | undefined
  state: 'failed' | 'retrying'
  /** created_at >= since (inclusive), when given. */
  since: Date | undefined
  /** created_at < until (exclusive), when given. */
  until: Date | undefined
  /** At most this many events, oldest first. */
  limit: number
}

// Which events a bulk filter matches: the one selection of the bulk statements and of their count.
const BULK_MATCH = `SELECT id FROM actions_event
    WHERE project = $1 AND ($2::text IS NULL OR target = $2) AND state = $3::actions_event_state
      AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
    ORDER BY created_at
    LIMIT $6`

const bulkParams = (f: BulkFilter) => [f.project, f.target ?? null, f.state, f.since ?? null, f.until ?? null, f.limit]

/** What a bulk statement did: the events its filter matched, and how many of them it changed. */
export type BulkChange = { matched: number; changed: number }

// Both bulk statements: the events the filter picks, and the change. The state is checked again in the
// UPDATE itself: an event a dispatcher claims between the pick and the update is re-read under the
// row lock and left alone (matched, not changed: the caller reports it as skipped). The project too:
// another project's event may have the same id.
const bulk = (head: string) => `WITH picked AS (${BULK_MATCH}),
  changed AS (${head} WHERE id = ANY(ARRAY(SELECT id FROM picked)) AND project = $1 AND state = $3::actions_event_state RETURNING 1)
  SELECT (SELECT count(*) FROM picked)::int AS matched, (SELECT count(*) FROM changed)::int AS changed`

async function changeMany(db: Queryable, head: string, filter: BulkFilter): Promise<BulkChange> {
  const { rows } = await db.query<BulkChange>(bulk(head), bulkParams(filter))
  return rows[0] ?? { matched: 0, changed: 0 }
}

/**
 * Bulk form of retryEvent, in one statement: every matching event becomes due now exactly as a single
 * retry makes it (state by attempt count, log and num_retries kept).
 */
export async function retryEvents(db: Queryable, filter: BulkFilter): Promise<BulkChange> {
  return changeMany(db, REOPEN, filter)
}

/** Bulk form of stopEvent, in one statement: every matching event becomes `stopped`. */
export async function stopEvents(db: Queryable, filter: BulkFilter): Promise<BulkChange> {
  return changeMany(db, STOP, filter)
}

/**
 * How many events a bulk retry or stop with `filter` would change now (at most its limit): the same
 * selection, counted without a lock or a change, so the number a console shows before the operator
 * confirms is the number the bulk call takes (unless events change state in between).
 */
export async function countBulkEvents(db: Queryable, filter: BulkFilter): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${BULK_MATCH}) m`, bulkParams(filter))
  return rows[0]?.n ?? 0
}

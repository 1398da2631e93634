import { z } from 'zod'
import { eventDetailJson, listedEventJson } from '../shapes.js'
import { eventProject, getEvent, listEvents, type ListedEvent, type Listing } from '../db/operator.js'
import { retryOne } from '../operate/retry.js'
import { stopOne } from '../operate/stop.js'
import type { EventRow } from '../events.js'
import { shownRedaction } from '../operate/shown.js'
import type { Redactor } from '../text.js'
import { BULK_OPTIONS, BULK_USAGE, bulkCommand } from './bulk.js'
import { printDocument, printLines } from './json.js'
import { parseCommand, UsageError, type EventsContext, type Io } from './usage.js'
import { reportWake } from './wake.js'

export const EVENTS_USAGE = `  events failed|processing|due <project> [--limit N]
                                            list events (default limit 50); failed lists failed and
                                            retrying events, as upstream's failedEvents does
  events show <id> [--project P]            print one event with its latest log entries
  events retry <id> [--project P] [--force] make an event due now (created if never attempted, else
                                            retrying) and wake its project's dispatch; refused while
                                            it is being delivered, and for a delivered or stopped
                                            event unless --force
  events stop <id> [--project P]            stop an event for good (refused for a delivered or
                                            stopped one)
                                            (ids are per project: --project picks one when several
                                            projects use the id)
${BULK_USAGE}`

/** Listing size when --limit is not given (upstream's default is 100; a terminal page is less). */
const DEFAULT_LIMIT = 50
/** Longest listing: a bigger export belongs in SQL, not in a terminal. */
const MAX_LIMIT = 10_000
/** Characters of receiver text a listing prints per event: one line each, never a 900 KB one. */
export const LISTED_ERROR_CHARS = 200
/** Characters of one stored text field (`response`, `errorMessage`) that `events show` prints. */
const SHOWN_TEXT_CHARS = 4_096
/** Log entries `events show` prints (the latest); maxAttempts may allow a thousand. */
const SHOWN_LOG_ENTRIES = 20

/** `actions events …`: the operator's view of the queue. */
export async function eventsCommand(ctx: EventsContext, args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommand('events', args, { limit: { type: 'string' }, force: { type: 'boolean' }, ...BULK_OPTIONS })
  const [sub, arg, extra] = positionals
  const bulkFlags = Object.keys(BULK_OPTIONS).filter(k => k in values)
  const byId = sub === 'show' || sub === 'retry' || sub === 'stop'
  if (sub === 'retry' || sub === 'stop') {
    // The bulk form has no id; the single form takes an id and, to tell apart projects sharing it, --project.
    if (arg === undefined && bulkFlags.length) {
      if (values.project === undefined) throw new UsageError(`events ${sub}: the bulk form needs --project`)
      return bulkCommand(ctx, sub, values, io)
    }
  }
  const idFlags = bulkFlags.filter(k => k !== 'project')
  if (byId && idFlags.length) throw new UsageError(`events ${sub}: --${idFlags[0]} applies to the bulk form (no event id) only`)
  if (!byId && bulkFlags.length)
    throw new UsageError(`events ${sub ?? ''}: --project, --target, --state, --since and --until apply to retry, stop and show only`)
  if (!arg) throw new UsageError(`events ${sub ?? ''}: missing argument`)
  if (extra !== undefined) throw new UsageError(`events ${sub ?? ''}: unexpected argument ${positionals.length}`)
  if (values.limit !== undefined && !isListing(sub)) throw new UsageError(`events ${sub ?? ''}: --limit applies to listings only`)
  if (values.force !== undefined && sub !== 'retry') throw new UsageError(`events ${sub ?? ''}: --force applies to a single retry only`)
  switch (sub) {
    case 'failed':
    case 'processing':
    case 'due':
      return list(ctx, arg, sub, parseLimit(values.limit), io)
    case 'show':
      return show(ctx, uuid(arg), values.project, io)
    case 'retry':
      return retry(ctx, uuid(arg), values.project, values.force === true, io)
    case 'stop': {
      const id = uuid(arg)
      const project = await projectOf(ctx, id, values.project)
      const result = await stopOne({ db: ctx.pool, signals: undefined }, { project, id })
      if (!result.ok) throw new Error(result.found ? `event ${id}: stop refused: ${result.reason}` : `no event ${id}`)
      if (io.json) printDocument(io, { id, project, state: 'stopped' })
      else io.out(`event ${id} stopped`)
      return 0
    }
    default:
      throw new UsageError(`events: unknown subcommand "${sub ?? ''}"`)
  }
}

/** Prints one listing of a project's events, receiver text redacted and cut to one line each. */
async function list(ctx: EventsContext, project: string, listing: Listing, limit: number, io: Io): Promise<number> {
  const shownWith = await shownRedaction(ctx.pool, project)
  // Fetched past the shown part by the longest redacted form of a secret, so no secret is cut in half;
  // a text that long may be a prefix of the stored one, and the redaction then stops before its end.
  const errorChars = LISTED_ERROR_CHARS + shownWith.reach
  const rows = await listEvents(ctx.pool, project, listing, limit, errorChars)
  const redact: Redactor = text => shownWith.redact(text, { prefix: Array.from(text).length >= errorChars })
  if (io.json) {
    // The same start of the error as the line form: redacted first, then cut, so no secret is cut in half.
    printLines(
      io,
      rows.map(row => listedEventJson(row, text => cut(redact(text), LISTED_ERROR_CHARS))),
    )
    return 0
  }
  for (const row of rows) io.out(summary(row, redact))
  io.out(`${rows.length} ${listing} event(s)${rows.length === limit ? ` (limit ${limit})` : ''}`)
  return 0
}

/** Prints one event as JSON with its latest log entries, redacted with its project's variables. */
async function show(ctx: EventsContext, id: string, given: string | undefined, io: Io): Promise<number> {
  const row = await getEvent(ctx.pool, await projectOf(ctx, id, given), id)
  if (!row) throw new Error(`no event ${id}`)
  const { redact } = await shownRedaction(ctx.pool, row.project)
  // --json prints the API's shape (GET …/events/:id): the whole stored log, redacted.
  if (io.json) printDocument(io, eventDetailJson(row, redact))
  else io.out(JSON.stringify(shown(row, redact), null, 2))
  return 0
}

/** The project of event `id` (`--project` when given); an unknown id is an error naming it. */
async function projectOf(ctx: EventsContext, id: string, project: string | undefined): Promise<string> {
  const found = await eventProject(ctx.pool, id, project)
  if (found === undefined) throw new Error(`no event ${id}${project === undefined ? '' : ` in project ${oneLine(project, 64)}`}`)
  return found
}

const isListing = (sub: string | undefined): sub is Listing => sub === 'failed' || sub === 'processing' || sub === 'due'

/**
 * Upstream requeues and then notifies the project's dispatcher (lib/operate/retry.ts, the rule REST
 * and GraphQL follow too). The retry is committed first, so a signal that cannot be sent costs only
 * latency: the sweeper re-drives due events within a minute.
 */
async function retry(ctx: EventsContext, id: string, given: string | undefined, force: boolean, io: Io): Promise<number> {
  const project = await projectOf(ctx, id, given)
  const result = await retryOne({ db: ctx.pool, signals: ctx.signals() }, { project, id, force })
  if (!result.ok) throw new Error(result.found ? `event ${id}: retry refused: ${result.reason}` : `no event ${id}`)
  if (io.json) printDocument(io, { id, project, due: true })
  else io.out(`event ${id} is due now`)
  return reportWake(result.signal, project, io, 'retry', 'event')
}

function parseLimit(given: string | undefined): number {
  if (given === undefined) return DEFAULT_LIMIT
  const parsed = z.coerce.number().int().positive().max(MAX_LIMIT).safeParse(given)
  if (!parsed.success) throw new UsageError(`--limit: expected a positive integer up to ${MAX_LIMIT}`)
  return parsed.data
}

function uuid(id: string): string {
  // An id is short when valid; a long argument is cut so the message stays one line.
  if (!z.uuid().safeParse(id).success) throw new UsageError(`expected an event id (uuid), got "${oneLine(id, 40)}"`)
  return id
}

// Stored text is shown with the project's current secrets redacted (lib/operate/shown.ts, and
// docs/design.md, "Text from outside"): a value stored before redaction existed, or a variable added
// since, is never printed.
function summary(r: ListedEvent, redact: Redactor): string {
  const fetched = r.last_error ?? ''
  const points = Array.from(redact(fetched))
  // What the listing leaves out: the redacted text past the shown part, and what was not fetched.
  const more = points.length - LISTED_ERROR_CHARS + (r.last_error_chars - Array.from(fetched).length)
  const error =
    r.last_error === null
      ? ''
      : ` ${oneLine(points.slice(0, LISTED_ERROR_CHARS).join(''), LISTED_ERROR_CHARS)}${more > 0 ? `… [${more} more characters]` : ''}`
  return `${r.id} ${r.state} target=${r.target} trigger=${r.trigger} attempts=${r.num_retries} due=${r.visible_at.toISOString()}${error}`
}

/** The event as `events show` prints it: the latest log entries, each text field redacted, then bounded. */
function shown(row: EventRow, redact: Redactor): Record<string, unknown> {
  const omitted = Math.max(0, row.log.length - SHOWN_LOG_ENTRIES)
  const log = row.log.slice(omitted).map(entry => {
    if (typeof entry !== 'object' || entry === null) return entry
    return Object.fromEntries(Object.entries(entry).map(([k, v]) => [k, typeof v === 'string' ? cut(redact(v), SHOWN_TEXT_CHARS) : v]))
  })
  return { ...row, log, ...(omitted ? { logEntriesOmitted: omitted } : {}) }
}

/** Cuts text to `max` characters on a code point boundary, saying how much was left out. */
function cut(text: string, max: number): string {
  const points = Array.from(text)
  return points.length <= max ? text : `${points.slice(0, max).join('')}… [${points.length - max} more characters]`
}

// A receiver's text (or a name in a stored schema) may hold newlines or terminal escape sequences: shown as one inert line.
export const oneLine = (text: string, max: number) => cut(text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' '), max)

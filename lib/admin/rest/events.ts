// GET …/events (a page, newest change first), GET …/events/:id (with its attempt log), POST …/events
// (the enqueue contract) and POST …/events/:id/retry|stop.
import { z } from 'zod'
import { listEventPage, type EventCursor } from '../../db/admin-events.js'
import { getEvent } from '../../db/operator.js'
import { enqueue } from '../../enqueue.js'
import { retryOne } from '../../operate/retry.js'
import { shownRedaction } from '../../operate/shown.js'
import { stopOne } from '../../operate/stop.js'
import { eventDetailJson, eventJson } from '../../shapes.js'
import { ProblemError, type Route, type RouteContext } from '../types.js'
import { conflict, nameSchema, notFound, param, projectOf, queryOf, reportSignal, stateSchema, timeSchema, validated } from './common.js'

/** A page holds at most this many events: one answer stays a few hundred KB whatever the filter. */
export const MAX_PAGE_EVENTS = 1000
/** Events per page when `limit` is not given (upstream's failedEvents default). */
export const DEFAULT_PAGE_EVENTS = 100
/** Characters of the last error a listed event carries (the CLI's listings show as many). */
export const LISTED_ERROR_CHARS = 200
/** A cursor is ours and short (about 70 characters); anything longer was not made by us. */
const MAX_CURSOR_CHARS = 128
/** A cursor's time is before the year 10000 (microseconds since the epoch): later ones overflow Postgres' interval arithmetic. */
const MAX_CURSOR_US = 253_402_300_800_000_000n

const listQuery = z
  .object({
    state: stateSchema.optional(),
    target: nameSchema.optional(),
    since: timeSchema.optional(),
    until: timeSchema.optional(),
    limit: z.coerce.number().int().min(1).max(MAX_PAGE_EVENTS).default(DEFAULT_PAGE_EVENTS),
    cursor: z.string().max(MAX_CURSOR_CHARS).optional(),
  })
  .strict()

const eventId = z.uuid()

/** An opaque cursor: base64url of `<microseconds>.<id>` of the last event of a page. */
export function encodeCursor(c: EventCursor): string {
  return Buffer.from(`${c.changeUs}.${c.id}`).toString('base64url')
}

/** The cursor a page handed out, or a 400 problem for anything else. */
export function decodeCursor(text: string): EventCursor {
  const match = /^(\d{1,18})\.(.{36})$/.exec(Buffer.from(text, 'base64url').toString('latin1'))
  const [, us, id] = match ?? []
  if (us === undefined || id === undefined || BigInt(us) >= MAX_CURSOR_US || !eventId.safeParse(id).success)
    throw new ProblemError(400, 'Bad cursor', 'cursor: expected the nextCursor of an earlier page')
  return { changeUs: BigInt(us), id }
}

const cut = (text: string, max: number) => Array.from(text).slice(0, max).join('')

async function listEvents(ctx: RouteContext) {
  const project = projectOf(ctx)
  const q = queryOf(ctx, listQuery)
  if (q.since && q.until && q.since >= q.until) throw new ProblemError(400, 'Bad request', 'since must be before until')
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
  const { redact, reach } = await shownRedaction(ctx.deps.db, project)
  // Fetched past the shown part by the longest redacted form, so no secret is cut in half; a text
  // that long may be a prefix of the stored one, and the redaction then stops before its end.
  const errorChars = LISTED_ERROR_CHARS + reach
  const page = await listEventPage(ctx.deps.db, { project, ...q, after, errorChars })
  const shown = (text: string) => cut(redact(text, { prefix: Array.from(text).length >= errorChars }), LISTED_ERROR_CHARS)
  return {
    status: 200,
    body: {
      events: page.events.map(row => eventJson(row, shown)),
      nextCursor: page.next ? encodeCursor(page.next) : null,
    },
  }
}

async function showEvent(ctx: RouteContext) {
  const project = projectOf(ctx)
  const id = param(ctx, 'id', eventId)
  const row = await getEvent(ctx.deps.db, project, id)
  if (!row) throw notFound(`no event ${id} in this project`)
  return { status: 200, body: eventDetailJson(row, (await shownRedaction(ctx.deps.db, project)).redact) }
}

/** The enqueue contract; the path names the project, and a body naming another one is refused. */
async function enqueueEvents(ctx: RouteContext) {
  const project = projectOf(ctx)
  const body = ctx.body
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ProblemError(400, 'Invalid enqueue request', 'request: expected an object')
  if ('project' in body && body.project !== project)
    throw new ProblemError(400, 'Invalid enqueue request', 'project: must be the project of the path, or left out')
  // enqueue sends the one signal itself when it wrote events, and logs a failed one.
  const result = await validated(() => enqueue(ctx.deps, { ...body, project }, ctx.trace))
  return { status: 200, body: result }
}

/** The body of POST …/events/:id/retry, optional: `force` retries a delivered or stopped event too. */
export const retryBody = z
  .object({
    force: z.boolean().default(false).describe('Also retry an event in state succeed or stopped (delivering it again).'),
  })
  .strict()

/** POST …/events/:id/retry: the rule is lib/operate/retry.ts's; a refusal is a 409 saying why. */
async function retry(ctx: RouteContext) {
  const project = projectOf(ctx)
  const id = param(ctx, 'id', eventId)
  const { force } = retryBody.parse(ctx.body ?? {})
  const result = await retryOne({ db: ctx.deps.db, signals: ctx.deps.signals }, { project, id, force })
  if (!result.ok) throw result.found ? conflict(result.reason) : notFound(`no event ${id} in this project`)
  return { status: 200, body: { id, action: 'retry', signalled: reportSignal(ctx, project, 'retry', result.signal) } }
}

/** POST …/events/:id/stop: the rule is lib/operate/stop.ts's; a refusal is a 409 saying why. */
async function stop(ctx: RouteContext) {
  const project = projectOf(ctx)
  const id = param(ctx, 'id', eventId)
  const result = await stopOne({ db: ctx.deps.db, signals: ctx.deps.signals }, { project, id })
  if (!result.ok) throw result.found ? conflict(result.reason) : notFound(`no event ${id} in this project`)
  return { status: 200, body: { id, action: 'stop', signalled: false } }
}

/** The event routes (the bulk forms are in bulk.ts). */
export const eventRoutes: Route[] = [
  { method: 'GET', path: '/v1/projects/:project/events', need: 'view', handle: listEvents },
  { method: 'POST', path: '/v1/projects/:project/events', need: 'admin', handle: enqueueEvents },
  { method: 'GET', path: '/v1/projects/:project/events/:id', need: 'view', handle: showEvent },
  { method: 'POST', path: '/v1/projects/:project/events/:id/retry', need: 'admin', handle: retry },
  { method: 'POST', path: '/v1/projects/:project/events/:id/stop', need: 'admin', handle: stop },
]

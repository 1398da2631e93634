// GET …/events (a page, newest change first), GET …/events/:id (with its attempt log), POST …/events
// (the enqueue contract) and POST …/events/:id/retry|stop.
import { z } from 'zod'
import { listEventPage, type EventCursor } from '../../db/admin-events.js'
import { getEvent, retryEvent, stopEvent } from '../../db/operator.js'
import { fetchVariables } from '../../db/variables.js'
import { enqueue } from '../../enqueue.js'
import { redactor, type Redactor } from '../../text.js'
import { eventDetailJson, eventJson } from '../../shapes.js'
import { ProblemError, type Route, type RouteContext } from '../types.js'
import { nameSchema, notFound, param, projectOf, queryOf, signal, stateSchema, timeSchema, validated } from './common.js'

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

/** The project's variables as a redactor, for receiver text (docs/design.md, "Text from outside"); the values go nowhere else. */
async function projectRedactor(ctx: RouteContext, project: string): Promise<{ redact: Redactor; reach: number }> {
  const values = [...(await fetchVariables(ctx.deps.db, project)).values()]
  // A redacted form spans up to 9 characters per UTF-16 unit (URL-encoding): fetch that far past the shown part.
  const reach = 9 * values.reduce((longest, v) => Math.max(longest, v.length), 0)
  return { redact: redactor(values), reach }
}

const cut = (text: string, max: number) => Array.from(text).slice(0, max).join('')

async function listEvents(ctx: RouteContext) {
  const project = projectOf(ctx)
  const q = queryOf(ctx, listQuery)
  if (q.since && q.until && q.since >= q.until) throw new ProblemError(400, 'Bad request', 'since must be before until')
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
  const { redact, reach } = await projectRedactor(ctx, project)
  const page = await listEventPage(ctx.deps.db, { project, ...q, after, errorChars: LISTED_ERROR_CHARS + reach })
  return {
    status: 200,
    body: {
      events: page.events.map(row => eventJson(row, text => cut(redact(text), LISTED_ERROR_CHARS))),
      nextCursor: page.next ? encodeCursor(page.next) : null,
    },
  }
}

async function showEvent(ctx: RouteContext) {
  const project = projectOf(ctx)
  const id = param(ctx, 'id', eventId)
  const row = await getEvent(ctx.deps.db, project, id)
  if (!row) throw notFound(`no event ${id} in this project`)
  return { status: 200, body: eventDetailJson(row, (await projectRedactor(ctx, project)).redact) }
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

/** POST …/events/:id/retry or stop; a retry then sends the project's one signal. */
const single = (action: 'retry' | 'stop') => async (ctx: RouteContext) => {
  const project = projectOf(ctx)
  const id = param(ctx, 'id', eventId)
  const changed = action === 'retry' ? await retryEvent(ctx.deps.db, project, id) : await stopEvent(ctx.deps.db, project, id)
  if (!changed) throw notFound(`no event ${id} in this project`)
  const signalled = action === 'retry' ? await signal(ctx, project, 'retry') : false
  return { status: 200, body: { id, action, signalled } }
}

/** The event routes (the bulk forms are in bulk.ts). */
export const eventRoutes: Route[] = [
  { method: 'GET', path: '/v1/projects/:project/events', need: 'view', handle: listEvents },
  { method: 'POST', path: '/v1/projects/:project/events', need: 'admin', handle: enqueueEvents },
  { method: 'GET', path: '/v1/projects/:project/events/:id', need: 'view', handle: showEvent },
  { method: 'POST', path: '/v1/projects/:project/events/:id/retry', need: 'admin', handle: single('retry') },
  { method: 'POST', path: '/v1/projects/:project/events/:id/stop', need: 'admin', handle: single('stop') },
]

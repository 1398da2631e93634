// What every REST handler shares: input parsing with zod (a ZodError is the router's 400 problem),
// the engine's validation errors as 400 problems, the project of the path, and the one signal.
import { z } from 'zod'
import { ValidationError } from '../../errors.js'
import { wakeProject, type SignalOutcome } from '../../operate/types.js'
import { SignalError } from '../../signals.js'
import { EVENT_STATES } from '../../shapes.js'
import { textProblem } from '../../schema/json.js'
import { MAX_NAME_BYTES, nameProblem } from '../../schema/limits.js'
import { ProblemError, type RouteContext } from '../types.js'
import type { EventState } from '../../events.js'

/** A project, target or variable name: non-empty and at most MAX_NAME_BYTES of UTF-8 (lib/schema/limits.ts). */
export const nameSchema = z
  .string()
  .min(1)
  .refine(s => nameProblem('', s) === undefined, `expected a name of at most ${MAX_NAME_BYTES} bytes (UTF-8)`)

/** An event state, as a query parameter. */
export const stateSchema = z.enum(EVENT_STATES as [EventState, ...EventState[]])

/** An ISO 8601 date or date-time with a zone: a bare local time would mean whatever the caller's clock thinks. */
export const timeSchema = z.union([z.iso.datetime({ offset: true }), z.iso.date()]).transform(s => new Date(s))

/** Path parameters, parsed: the project (and the other names) bounded, an event id a uuid. */
export function param<T>(ctx: RouteContext, name: string, schema: z.ZodType<T>): T {
  const parsed = schema.safeParse(ctx.params[name])
  if (parsed.success) return parsed.data
  // Issues under the parameter's name, as the router lists them (paths and messages, never values).
  throw new z.ZodError(parsed.error.issues.map(issue => ({ ...issue, path: [name, ...issue.path] })))
}

/** The path's project, bounded like every name. */
export const projectOf = (ctx: RouteContext): string => param(ctx, 'project', nameSchema)

/**
 * The query as an object for a strict zod schema: an unknown parameter is an error (a typo must not
 * widen a listing or a bulk change), and so is one given twice.
 */
export function queryOf<T>(ctx: RouteContext, schema: z.ZodType<T>): T {
  const out: Record<string, string> = {}
  for (const [key, value] of ctx.query) {
    if (key in out) throw new ProblemError(400, 'Bad request', `query parameter ${key.slice(0, 64)} is given more than once`)
    // NUL or a lone surrogate reaches Postgres as a failed statement (a 500): refused here, as in a path or body.
    const bad = textProblem(key) ?? textProblem(value)
    if (bad) throw new ProblemError(400, 'Bad request', `query parameter ${key.slice(0, 64).replace(/[^\x20-\x7e]/g, '?')} ${bad}`)
    out[key] = value
  }
  return schema.parse(out)
}

/**
 * Runs `fn`, answering the engine's own validation errors (enqueue requests, actions schemas, names
 * over their bound) as a 400 problem listing each problem: they name paths and limits, never values.
 */
export async function validated<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (e) {
    if (e instanceof ValidationError) throw new ProblemError(400, `Invalid ${e.subject}`, e.problems.join('; '))
    throw e
  }
}

/** A 404 problem for something the project does not have. */
export const notFound = (what: string) => new ProblemError(404, 'Not found', what)

/**
 * The one wake-up signal after a change that made events due. The change is committed, so a signal
 * that cannot be sent only costs latency (the sweeper re-drives due events within a minute): it is
 * logged, and the answer stands.
 */
export async function signal(ctx: RouteContext, project: string, change: string): Promise<boolean> {
  return reportSignal(ctx, project, change, await wakeProject(ctx.deps.signals, project))
}

/** Logs a signal that failed (an operator verb's outcome); true when it was sent. */
export function reportSignal(ctx: RouteContext, project: string, change: string, outcome: SignalOutcome): boolean {
  if (outcome.sent) return true
  if (outcome.why !== 'failed') return false
  // A SignalError's words are ours (the SDK's name and code); anything else is told by name only.
  const { error } = outcome
  const told = error instanceof SignalError ? { error } : { errorName: error instanceof Error ? error.name : typeof error }
  ctx.deps.log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { project, change, ...told })
  return false
}

/** The 409 problem of an operator verb's refusal: the event's state and why, never a value. */
export const conflict = (reason: string) => new ProblemError(409, 'Conflict', reason)

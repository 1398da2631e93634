// The admin API's router: one transport-free function from an AdminRequest to an
// AdminResponse, shared by the Lambda Function URL (functions/admin.ts) and the local stack. It
// matches the route, authenticates and authorizes the caller, reads the JSON body and turns every
// failure into an RFC 9457 problem. It never logs a token, a header, a body or an error's message.
import { z } from 'zod'
import type { Deps } from '../deps.js'
import { ValidationError } from '../errors.js'
import { describeBounded, inspectJson, MAX_PROBLEMS, textProblem } from '../schema/json.js'
import { MAX_DEPTH, MAX_REQUEST_BYTES } from '../schema/limits.js'
import { authenticate, authorize, type Trust } from './auth.js'
import { ProblemError, type AdminRequest, type AdminResponse, type Route, type RouteResult } from './types.js'

/**
 * Largest request body the admin API reads: the enqueue request's bound, since `POST …/events` carries
 * an enqueue request and nothing else the API takes is larger.
 */
export const MAX_ADMIN_BODY_BYTES = MAX_REQUEST_BYTES

/** Answers one request; `trust` is what the transport vouches for about the caller. */
export type Router = (deps: Deps, request: AdminRequest, trust?: Trust) => Promise<AdminResponse>

type Compiled = { route: Route; segments: readonly string[]; literals: number }
type Match = { route: Route; params: Record<string, string> }

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Content Too Large',
  500: 'Internal Server Error',
}

// nosniff: a browser never reads an answer as anything but its content type (the console's own pages say the same).
const COMMON_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }

/** An RFC 9457 problem response (`type: about:blank`, so `title` is the status's reason phrase unless given). */
export function problem(
  status: number,
  detail?: string,
  title = REASONS[status] ?? 'Error',
  headers: Record<string, string> = {},
): AdminResponse {
  const body = { type: 'about:blank', title, status, ...(detail === undefined ? {} : { detail }) }
  return { status, headers: { ...COMMON_HEADERS, 'content-type': 'application/problem+json', ...headers }, body: JSON.stringify(body) }
}

function answer(result: RouteResult): AdminResponse {
  if (result.status === 204 || result.body === undefined) return { status: result.status, headers: { ...COMMON_HEADERS }, body: '' }
  return { status: result.status, headers: { ...COMMON_HEADERS, 'content-type': 'application/json' }, body: JSON.stringify(result.body) }
}

/** A path's segments, percent-decoded; undefined when an escape is malformed. */
function segmentsOf(path: string): string[] | undefined {
  try {
    return path.split('/').slice(1).map(decodeURIComponent)
  } catch {
    return undefined
  }
}

function matchSegments(pattern: readonly string[], actual: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== actual.length) return undefined
  const params: Record<string, string> = {}
  for (const [i, part] of pattern.entries()) {
    const value = actual[i] ?? ''
    if (part.startsWith(':')) {
      if (value === '') return undefined
      params[part.slice(1)] = value
    } else if (part !== value) return undefined
  }
  return params
}

/** The parsed body, or a problem when it is too large or not JSON (undefined body when there is none). */
function readBody(text: string): { ok: true; value: unknown } | { ok: false; response: AdminResponse } {
  if (Buffer.byteLength(text, 'utf8') > MAX_ADMIN_BODY_BYTES)
    return { ok: false, response: problem(413, `The request body is larger than ${MAX_ADMIN_BODY_BYTES} bytes.`) }
  if (text.trim() === '') return { ok: true, value: undefined }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { ok: false, response: problem(400, 'The request body is not JSON.') }
  }
  const problems = inspectJson(value, [], { maxDepth: MAX_DEPTH })
  if (problems.length) return { ok: false, response: problem(400, `The request body cannot be used: ${problems.join('; ')}`) }
  return { ok: true, value }
}

/** What the router is told besides its routes. */
export type RouterOptions = {
  /** Called with every unexpected failure (after it is logged by name): the Lambda transport renews a refused database login. */
  onFailure?: (error: unknown) => void
}

/** The problem a failure becomes: its own, a validation's (paths and messages only), or a 500 that tells nothing. */
function failure(deps: Deps, route: Route, error: unknown, opts: RouterOptions): AdminResponse {
  if (error instanceof ProblemError) return problem(error.status, error.detail, error.title)
  if (error instanceof z.core.$ZodError) return problem(400, describeBounded(error.issues).join('; '))
  if (error instanceof ValidationError) {
    const lines = error.problems.slice(0, MAX_PROBLEMS)
    return problem(400, `Invalid ${error.subject}: ${lines.join('; ')}`)
  }
  // By name only: a driver's or SDK's message may quote input, a URL or a header.
  const name = error instanceof Error ? error.name : typeof error
  deps.log.error('admin route failed', { method: route.method, route: route.path, errorName: name })
  opts.onFailure?.(error)
  return problem(500, 'The request could not be completed; the failure is logged.')
}

/**
 * Builds the router over `routes`: 404 when no route has the path, 405 (with Allow) when none has the
 * method, 401 without a valid caller, 403 when the caller may not do the route's need on its
 * `:project`, 413 and 400 for a body too large or not JSON, then the handler's answer.
 */
export function createRouter(routes: readonly Route[], opts: RouterOptions = {}): Router {
  const compiled: Compiled[] = routes
    .map(route => {
      const segments = route.path.split('/').slice(1)
      return { route, segments, literals: segments.filter(p => !p.startsWith(':')).length }
    })
    // A literal segment wins over a parameter whatever the list's order: POST …/events/retry is the
    // bulk route, never an event named "retry". Array.sort is stable, so equals keep their order.
    .sort((a, b) => b.literals - a.literals)
  return async (deps, request, trust = {}) => {
    const segments = segmentsOf(request.path)
    if (!segments) return problem(400, 'The path holds a malformed percent-escape.')
    const matches: Match[] = compiled.flatMap(c => {
      const params = matchSegments(c.segments, segments)
      return params ? [{ route: c.route, params }] : []
    })
    if (matches.length === 0) return problem(404, 'No route has this path.')
    const match = matches.find(m => m.route.method === request.method)
    if (!match) {
      const allow = [...new Set(matches.map(m => m.route.method))].join(', ')
      return problem(405, `This path takes ${allow}.`, undefined, { allow })
    }
    try {
      return await serve(deps, request, trust, match)
    } catch (error) {
      return failure(deps, match.route, error, opts)
    }
  }
}

/** Authenticates, authorizes, reads the body and calls the matched route. */
async function serve(deps: Deps, request: AdminRequest, trust: Trust, { route, params }: Match): Promise<AdminResponse> {
  const principal = await authenticate(deps.db, request.headers['authorization'], trust)
  if (!principal) return problem(401, 'A valid Bearer token is required.', undefined, { 'www-authenticate': 'Bearer realm="actions"' })
  if (!authorize(principal, route.need, params['project'])) return problem(403, 'This token may not do that on this project.')

  const bad = Object.entries(params).find(([, v]) => textProblem(v) !== undefined)
  if (bad) return problem(400, `Path parameter ${bad[0]} ${textProblem(bad[1]) ?? 'is invalid'}.`)
  const body = readBody(request.body)
  if (!body.ok) return body.response
  const trace = { traceparent: request.headers['traceparent'], tracestate: request.headers['tracestate'] }
  return answer(await route.handle({ deps, principal, params, query: request.query, body: body.value, trace }))
}

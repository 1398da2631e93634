// The admin API's shared contract: who calls, what a route needs, and the transport-free
// request and response every adapter (the Lambda Function URL, the local stack's HTTP server) maps to.
import type { Deps } from '../deps.js'
import type { Principal } from '../db/tokens.js'
import type { TraceCarrier } from '../tracing/context.js'

export type { Principal, Role } from '../db/tokens.js'

/**
 * What a route needs of its caller on the project it names: `view` (any role; variable values are never
 * shown), `variables` (deployer or admin: change variables), `admin` (admin: retry, stop, pause, schema,
 * enqueue). A system principal has every need.
 */
export type Need = 'view' | 'variables' | 'admin'

/** One HTTP request, already read (the body bounded by the adapter). Header names are lower case. */
export type AdminRequest = {
  method: string
  path: string
  query: URLSearchParams
  headers: Readonly<Record<string, string | undefined>>
  body: string
}

/** One HTTP response; `body` is the serialized JSON (or problem+json) text. */
export type AdminResponse = { status: number; headers: Record<string, string>; body: string }

/** What a route handler gets: the deps, the caller (already authorized for the route's need), path params. */
export type RouteContext = {
  deps: Deps
  principal: Principal
  params: Readonly<Record<string, string>>
  query: URLSearchParams
  /** The parsed JSON body (undefined when the request had none). */
  body: unknown
  /** The request's W3C `traceparent` and `tracestate` headers (an enqueue's producer context). */
  trace?: TraceCarrier
}

/** A handler's answer: a status and a JSON-serializable body (204 has none). */
export type RouteResult = { status: number; body?: unknown }

/** One REST route: `path` uses `:name` segments, e.g. `/v1/projects/:project/events/:id`. */
export type Route = {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  path: string
  need: Need
  handle: (ctx: RouteContext) => Promise<RouteResult>
}

/** A failure a handler throws on purpose: answered as RFC 9457 application/problem+json, never logged with secrets. */
export class ProblemError extends Error {
  override name = 'ProblemError'
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail?: string,
  ) {
    super(detail ? `${title}: ${detail}` : title)
  }
}

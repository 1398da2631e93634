// The local stack's HTTP server: bounded request times and bodies, and errors answered without
// quoting the request (a body may hold target URLs and headers).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { EnqueueValidationError } from '../../lib/enqueue/errors.js'
import { MAX_TRACEPARENT_CHARS, MAX_TRACESTATE_CHARS } from '../../lib/enqueue/request.js'
import type { Logger } from '../../lib/log.js'
import { SchemaValidationError } from '../../lib/schema/actions.js'
import { within, type Cleanups } from './shutdown.js'

/** A request the stack refuses, with the status and a reason that quotes nothing from the body. */
export class RequestError extends Error {
  override name = 'RequestError'
  constructor(
    readonly status: number,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** Largest request body, as Lambda's synchronous invoke payload limit. */
const MAX_BODY_BYTES = 6 * 1024 * 1024
/** Time a request may take to arrive by default (Node's own default is 5 minutes). */
export const REQUEST_TIMEOUT_MS = 30_000

function listen(
  port: number,
  requestTimeoutMs: number,
  log: Logger,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<Server> {
  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough that a
  // stalled request is cut within a quarter of its timeout past it.
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(requestTimeoutMs / 4))),
    },
    (req, res) => {
      handle(req, res).catch((error: unknown) => {
        const route = `${req.method ?? ''} ${routeOf(req.url)}`
        const refused = refusal(error)
        if (refused) {
          // The reason names fields and limits; the body is never quoted.
          log.warn('Refused a local request', { route, status: refused.status, reason: refused.reason, fields: refused.fields })
          return reply(res, refused.status, { error: refused.reason, ...(refused.problems ? { problems: refused.problems } : {}) })
        }
        log.error('Local request failed', { route, error })
        reply(res, 500, { error: error instanceof Error ? error.name : 'Error' })
      })
    },
  )
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

/** How long open HTTP requests (an enqueue writing its rows) may take to finish at shutdown. */
const HTTP_DRAIN_MS = 5_000

/** The server on 127.0.0.1:`port`, closed at shutdown after its open requests get {@link HTTP_DRAIN_MS}; its URL and server. */
export async function serveHttp(
  port: number,
  requestTimeoutMs: number,
  log: Logger,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  cleanups: Cleanups,
): Promise<{ url: string; server: Server }> {
  const server = await listen(port, requestTimeoutMs, log, handle)
  const closed = new Promise<void>(r => server.once('close', () => r()))
  cleanups.push(async () => {
    // Requests still open get a moment; then their connections go.
    server.close()
    server.closeIdleConnections()
    if (!(await within(HTTP_DRAIN_MS, closed))) server.closeAllConnections()
    await closed
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }
}

/** What to answer for an error caused by the request itself; undefined for our own faults (500). */
function refusal(error: unknown): { status: number; reason: string; problems?: string[]; fields?: string[] } | undefined {
  if (error instanceof EnqueueValidationError || error instanceof SchemaValidationError) {
    // A problem reads `path: message`; the log gets the paths only, the producer gets the messages.
    return {
      status: 400,
      reason: error.name,
      problems: error.problems,
      fields: error.problems.slice(0, 20).map(p => p.split(':')[0] ?? ''),
    }
  }
  if (error instanceof RequestError) return { status: error.status, reason: error.message }
  // A malformed percent-escape in the project part of the path.
  if (error instanceof URIError) return { status: 400, reason: 'malformed path' }
  // Postgres' data exceptions (class 22: NUL bytes, invalid text, out-of-range values) come from input.
  if (error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('22')) {
    return { status: 400, reason: `input the database refuses (SQLSTATE ${error.code})` }
  }
  return undefined
}

/** The route of a request for the log: the project part of a path is kept short. */
function routeOf(url: string | undefined): string {
  const path = (url ?? '/').split('?')[0] ?? '/'
  return path.length > 80 ? `${path.slice(0, 80)}…` : path
}

export function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return
  if (res.headersSent) return void res.end()
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/**
 * A content API invokes the enqueue Lambda with its trace context in the payload; over this HTTP
 * endpoint a client sends the W3C headers instead, so they become those fields (a body's own win).
 */
export function withTraceHeaders(body: unknown, req: IncomingMessage): unknown {
  const { traceparent, tracestate } = req.headers
  // A header past its bound is ignored, as docs/enqueue.md says of a header that does not parse: as a
  // body field it would fail the whole request, blaming a field the client never sent.
  if (typeof traceparent !== 'string' || traceparent.length > MAX_TRACEPARENT_CHARS) return body
  if (typeof body !== 'object' || body === null || Array.isArray(body) || 'traceparent' in body) return body
  const state = typeof tracestate === 'string' && tracestate.length <= MAX_TRACESTATE_CHARS ? { tracestate } : {}
  return { ...body, traceparent, ...state }
}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  let size = 0
  const chunks: Buffer[] = []
  try {
    for await (const c of req) {
      const buf = Buffer.from(c)
      size += buf.length
      if (size > MAX_BODY_BYTES) throw new RequestError(413, 'request body over 6 MB (the Lambda invoke limit)')
      chunks.push(buf)
    }
  } catch (e) {
    // The server cut it at its time limit (and answered 408 itself), or the client went away.
    if (req.destroyed && !(e instanceof RequestError))
      throw new RequestError(408, 'request stopped arriving (time limit, or the client went away)')
    throw e
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch (cause) {
    // The parser's message quotes the body, and a schema holds target URLs: only its name is kept.
    throw new RequestError(400, 'request body is not valid JSON', {
      cause: new SyntaxError(cause instanceof Error ? cause.name : 'unparsable'),
    })
  }
}

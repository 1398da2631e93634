// The admin API over Node's HTTP server: the local stack's transport for lib/admin's
// router, as functions/admin.ts is the Function URL's. It reads the body bounded, hands the router an
// AdminRequest, and writes its AdminResponse. It logs nothing: a header or a body may hold a token.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Trust } from '../lib/admin/auth.js'
import { MAX_ADMIN_BODY_BYTES, problem, type Router } from '../lib/admin/router.js'
import type { AdminRequest, AdminResponse } from '../lib/admin/types.js'
import type { Deps } from '../lib/deps.js'
import { consoleResponse } from '../console/serve.js'

/** True when the local stack's server gives `path` to the admin API: upstream's `/actions/` and the REST `/v1/`. */
export function isAdminPath(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/') || path === '/actions' || path.startsWith('/actions/')
}

/** The body as text, or a problem when it passes the bound (the rest is not read) or stops arriving. */
async function readBody(req: IncomingMessage): Promise<{ ok: true; text: string } | { ok: false; response: AdminResponse }> {
  const declared = Number(req.headers['content-length'] ?? 0)
  if (declared > MAX_ADMIN_BODY_BYTES)
    return { ok: false, response: problem(413, `The request body is larger than ${MAX_ADMIN_BODY_BYTES} bytes.`) }
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of req) {
      const buf = Buffer.from(chunk)
      size += buf.length
      if (size > MAX_ADMIN_BODY_BYTES)
        return { ok: false, response: problem(413, `The request body is larger than ${MAX_ADMIN_BODY_BYTES} bytes.`) }
      chunks.push(buf)
    }
  } catch {
    // The server cut it at its time limit, or the client went away: nothing is left to answer well.
    return { ok: false, response: problem(400, 'The request body stopped arriving.') }
  }
  return { ok: true, text: Buffer.concat(chunks).toString('utf8') }
}

/** Lower-cased header names, each one value (repeated headers joined as HTTP allows). */
function headersOf(req: IncomingMessage): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : value
  return headers
}

/** Answers one request of the local stack's server through `router`; `trust` carries the bootstrap token. */
export async function serveAdmin(router: Router, deps: Deps, trust: Trust, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://local')
  const body = await readBody(req)
  const response = body.ok
    ? await router(
        deps,
        {
          method: req.method ?? 'GET',
          path: url.pathname,
          query: url.searchParams,
          headers: headersOf(req),
          body: body.text,
        } satisfies AdminRequest,
        trust,
      )
    : body.response
  if (res.destroyed) return
  // Unread body left behind (a 413): the connection cannot be reused, so it closes after this answer.
  res.writeHead(response.status, body.ok ? response.headers : { ...response.headers, connection: 'close' })
  res.end(response.body)
}

/** Answers a request for the web console's files (console/serve.ts): the known names only, with their CSP. */
export function serveConsole(req: IncomingMessage, res: ServerResponse): void {
  const response = consoleResponse(req.method ?? 'GET', new URL(req.url ?? '/', 'http://local').pathname)
  res.writeHead(response.status, response.headers)
  res.end(response.body)
}

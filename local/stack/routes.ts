// The local stack's routes: the enqueue function, schema storage, event counts, metrics and health,
// then the admin API and the console, as the deployment serves them.
import type { Context } from 'aws-lambda'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Registry } from 'prom-client'
import { createRouter } from '../../lib/admin/router.js'
import type { Route } from '../../lib/admin/types.js'
import { countEventsByState } from '../../lib/db/event-counts.js'
import { storeSchema } from '../../lib/db/schemas.js'
import type { Deps } from '../../lib/deps.js'
import { isConsolePath } from '../../console/serve.js'
import { isAdminPath, serveAdmin, serveConsole } from '../admin-http.js'
import { lambdaContext } from '../lambda.js'
import { readJson, reply, RequestError, withTraceHeaders } from './http.js'

/** What the routes call: the deps, the enqueue function as Lambda invokes it, the last sweep's gauges. */
export type RouteParts = {
  deps: Deps
  enqueue: (event: unknown, context: Context) => Promise<unknown>
  lastGauges: () => Registry
  adminRoutes: readonly Route[]
  adminToken: string
}

/** The request handler over the parts; an unknown route is a 404. */
export function localRoutes(parts: RouteParts): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { deps, enqueue } = parts
  const admin = createRouter(parts.adminRoutes)
  return async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://local').pathname
    if (isAdminPath(path)) return serveAdmin(admin, deps, { systemToken: parts.adminToken }, req, res)
    if (isConsolePath(path)) return serveConsole(req, res)
    if (req.method === 'POST' && path === '/enqueue')
      return reply(res, 200, await enqueue(withTraceHeaders(await readJson(req), req), lambdaContext('enqueue', 30_000)))
    const schemaPath = /^\/schema\/([^/]+)$/.exec(path)
    if (req.method === 'PUT' && schemaPath?.[1]) {
      const options = { maxTimeoutMs: deps.config.MAX_TARGET_TIMEOUT_MS }
      return reply(res, 200, { version: await storeSchema(deps.db, decodeURIComponent(schemaPath[1]), await readJson(req), options) })
    }
    const eventsPath = /^\/events\/([^/]+)$/.exec(path)
    if (req.method === 'GET' && eventsPath?.[1])
      return reply(res, 200, await countEventsByState(deps.db, decodeURIComponent(eventsPath[1])))
    if (req.method === 'GET' && path === '/metrics') {
      // Without a Pushgateway, /metrics serves this process's counters and the last sweep's gauges.
      const merged = Registry.merge([deps.metrics.registry, parts.lastGauges()])
      res.writeHead(200, { 'content-type': merged.contentType })
      return void res.end(await merged.metrics())
    }
    if (req.method === 'GET' && path === '/healthz') return reply(res, 200, { ok: true })
    throw new RequestError(404, 'no such route')
  }
}

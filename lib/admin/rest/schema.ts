// GET|PUT …/schema: the project's current actions schema, and a new version validated as `schema set`
// validates it (lib/db/schemas.ts storeSchema with the dispatch bound MAX_TARGET_TIMEOUT_MS).
import { getCurrentSchema, storeSchema } from '../../db/schemas.js'
import type { Route, RouteContext } from '../types.js'
import { notFound, projectOf, validated } from './common.js'

async function getSchema(ctx: RouteContext) {
  const current = await getCurrentSchema(ctx.deps.db, projectOf(ctx))
  if (!current) throw notFound('no actions schema is stored for this project')
  return { status: 200, body: { version: current.version, schema: current.schema } }
}

async function putSchema(ctx: RouteContext) {
  const project = projectOf(ctx)
  const maxTimeoutMs = ctx.deps.config.MAX_TARGET_TIMEOUT_MS
  // The parse bounds size, depth, names and every target's numbers; its problems never quote a URL or header.
  const version = await validated(() => storeSchema(ctx.deps.db, project, ctx.body, { maxTimeoutMs }))
  return { status: 200, body: { version } }
}

/** The schema routes. */
export const schemaRoutes: Route[] = [
  // The schema holds target URLs and headers, which count as secrets: a viewer does not read it.
  { method: 'GET', path: '/v1/projects/:project/schema', need: 'variables', handle: getSchema },
  { method: 'PUT', path: '/v1/projects/:project/schema', need: 'admin', handle: putSchema },
]

// The REST routes of the admin API under /v1. Each family lives in lib/admin/rest/; the
// router (lib/admin/router.ts) has already authenticated and authorized the caller for each route's need.
import { openApiDocument } from './openapi.js'
import { bulkRoutes } from './rest/bulk.js'
import { eventRoutes } from './rest/events.js'
import { schemaRoutes } from './rest/schema.js'
import { statsRoutes } from './rest/stats.js'
import { targetRoutes } from './rest/targets.js'
import { trendRoutes } from './rest/trends.js'
import { variableRoutes } from './rest/variables.js'
import { whoamiRoutes } from './rest/whoami.js'
import type { Route } from './types.js'

/** GET /v1/openapi.json: names no project, so any valid caller may read it. */
const openApiRoute: Route = {
  method: 'GET',
  path: '/v1/openapi.json',
  need: 'view',
  handle: async () => ({ status: 200, body: openApiDocument() }),
}

/** Every REST route, the bulk forms before the single-event ones they share a path shape with. */
export const restRoutes: Route[] = [
  ...bulkRoutes,
  ...eventRoutes,
  ...targetRoutes,
  ...schemaRoutes,
  ...variableRoutes,
  ...statsRoutes,
  ...trendRoutes,
  ...whoamiRoutes,
  openApiRoute,
]

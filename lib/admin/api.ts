// The admin API's routes, composed once for every transport: functions/admin.ts and the local stack.
import { graphqlRoute } from './graphql.js'
import { restRoutes } from './rest.js'
import type { Route } from './types.js'

/** Every route of the admin API: the REST routes under /v1, then upstream's GraphQL Actions API at POST /actions/:project. */
export function adminRoutes(): Route[] {
  return [...restRoutes, graphqlRoute]
}

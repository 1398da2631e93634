// GET …/stats: events by state, the due backlog and its oldest age, the dispatch heartbeat.
import { readProjectStats } from '../../db/admin-events.js'
import { statsJson } from '../../shapes.js'
import type { Route, RouteContext } from '../types.js'
import { projectOf } from './common.js'

async function stats(ctx: RouteContext) {
  const project = projectOf(ctx)
  return { status: 200, body: statsJson({ project, ...(await readProjectStats(ctx.deps.db, project)) }) }
}

/** The stats route. */
export const statsRoutes: Route[] = [{ method: 'GET', path: '/v1/projects/:project/stats', need: 'view', handle: stats }]

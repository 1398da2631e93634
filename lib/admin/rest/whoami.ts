// GET /v1/whoami and GET /v1/projects: what the web console asks first. It shows only the
// buttons the caller's role may use, and lists the projects the caller may see: every project with a
// schema for a system caller, its own project for a token. Neither answer carries a token or its id.
import { listProjects } from '../../db/schemas.js'
import type { Route, RouteContext } from '../types.js'

/** Who the caller is, without the token's id: a system caller, or a project token's project and role. */
async function whoami(ctx: RouteContext) {
  const p = ctx.principal
  return { status: 200, body: p.kind === 'system' ? { kind: 'system' } : { kind: 'token', project: p.project, role: p.role } }
}

async function projects(ctx: RouteContext) {
  const p = ctx.principal
  // A token sees its own project only, whether or not it has a schema yet: the listing leaks no other name.
  const names = p.kind === 'system' ? await listProjects(ctx.deps.db) : [p.project]
  return { status: 200, body: { projects: names } }
}

/** The caller routes: they name no project, so any valid caller may call them. */
export const whoamiRoutes: Route[] = [
  { method: 'GET', path: '/v1/whoami', need: 'view', handle: whoami },
  { method: 'GET', path: '/v1/projects', need: 'view', handle: projects },
]

// GET …/targets (health), POST …/targets/:target/pause|resume: as `actions targets …` does
// (lib/cli/targets.ts), the ops events included, and a resume wakes the project.
import { readTargetBacklog } from '../../db/admin-events.js'
import { readTargetOutcomes, RECENT_MAX_EVENTS, RECENT_WINDOW_SECONDS } from '../../db/admin-recent.js'
import { listTargetHealth, pauseTarget, resumeTarget } from '../../db/pauses.js'
import { getCurrentSchema } from '../../db/schemas.js'
import { readLastRequests } from '../../db/trends.js'
import { emitOps } from '../../ops.js'
import { targetJson } from '../../shapes.js'
import type { Route, RouteContext } from '../types.js'
import { nameSchema, notFound, param, projectOf, signal } from './common.js'

/** The targets of the project's current schema; an unknown project is a 404. */
async function schemaTargets(ctx: RouteContext, project: string): Promise<Set<string>> {
  const current = await getCurrentSchema(ctx.deps.db, project)
  if (!current) throw notFound('no actions schema is stored for this project')
  return new Set(Object.keys(current.schema.targets))
}

async function listTargets(ctx: RouteContext) {
  const project = projectOf(ctx)
  const names = await schemaTargets(ctx, project)
  const health = new Map((await listTargetHealth(ctx.deps.db, project)).map(h => [h.target, h]))
  const backlog = await readTargetBacklog(ctx.deps.db, project)
  const recent = await readTargetOutcomes(ctx.deps.db, project)
  // A health row of a target the schema no longer has is still shown: it may be paused, and resume clears it.
  const all = [...new Set([...names, ...health.keys()])].sort()
  const last = await readLastRequests(ctx.deps.db, project, all)
  return {
    status: 200,
    body: {
      targets: all.map(t => targetJson(t, names.has(t), health.get(t), backlog.get(t), recent.byTarget.get(t), last.get(t))),
      // What `recent` is computed over, so a reader can say "over the last hour".
      recentWindow: { seconds: RECENT_WINDOW_SECONDS, maxEvents: RECENT_MAX_EVENTS, limitReached: recent.limitReached },
    },
  }
}

async function pause(ctx: RouteContext) {
  const project = projectOf(ctx)
  const target = param(ctx, 'target', nameSchema)
  if (!(await schemaTargets(ctx, project)).has(target)) throw notFound('no such target in the current schema')
  const since = await pauseTarget(ctx.deps.db, project, target)
  // emitOps never throws: what it could not do, it logs; the pause stands.
  await emitOps(ctx.deps, [{ kind: 'target.paused', project, target }])
  return { status: 200, body: { target, state: 'paused', pausedAt: since.toISOString() } }
}

async function resume(ctx: RouteContext) {
  const project = projectOf(ctx)
  const target = param(ctx, 'target', nameSchema)
  const names = await schemaTargets(ctx, project)
  // A target no longer in the schema may still have a row (paused before it was removed): clearing it is allowed.
  const was = await resumeTarget(ctx.deps.db, project, target)
  if (!was && !names.has(target)) throw notFound('no such target in the current schema')
  const wasPaused = Boolean(was?.paused_reason)
  // As the engine does, only a pause that ended is news.
  if (wasPaused) await emitOps(ctx.deps, [{ kind: 'target.resumed', project, target }])
  const signalled = await signal(ctx, project, 'resume')
  return { status: 200, body: { target, state: 'running', wasPaused, signalled } }
}

/** The target routes. */
export const targetRoutes: Route[] = [
  { method: 'GET', path: '/v1/projects/:project/targets', need: 'view', handle: listTargets },
  { method: 'POST', path: '/v1/projects/:project/targets/:target/pause', need: 'admin', handle: pause },
  { method: 'POST', path: '/v1/projects/:project/targets/:target/resume', need: 'admin', handle: resume },
]

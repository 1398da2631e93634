// POST …/events/retry|stop: the CLI's bulk filter (lib/cli/bulk.ts), as lib/operate/retry.ts and
// stop.ts run it: one statement, then, for a retry that changed events, one signal.
// With `dryRun: true` the same filter is only counted (countBulkEvents): what a console shows
// before the operator confirms.
import { z } from 'zod'
import { countBulkEvents } from '../../db/operator.js'
import { retryMany } from '../../operate/retry.js'
import { stopMany } from '../../operate/stop.js'
import { MAX_BULK_EVENTS } from '../../schema/limits.js'
import { ProblemError, type Route, type RouteContext } from '../types.js'
import { nameSchema, projectOf, reportSignal, timeSchema } from './common.js'

/** The filter, as the CLI's flags: bounds on created_at, the oldest first, at most MAX_BULK_EVENTS per call. */
export const bulkBody = z
  .object({
    target: nameSchema.optional(),
    state: z.enum(['failed', 'retrying']).default('failed'),
    since: timeSchema.optional(),
    until: timeSchema.optional(),
    limit: z.number().int().min(1).max(MAX_BULK_EVENTS).default(MAX_BULK_EVENTS),
    dryRun: z.boolean().default(false).describe('Count the matching events (at most limit) and change none.'),
  })
  .strict()

const bulk = (action: 'retry' | 'stop') => async (ctx: RouteContext) => {
  const project = projectOf(ctx)
  // No body is the whole default filter: every failed event of the project, up to the limit.
  const f = bulkBody.parse(ctx.body ?? {})
  if (f.since && f.until && f.since >= f.until) throw new ProblemError(400, 'Bad request', 'since must be before until')
  const filter = { project, target: f.target, state: f.state, since: f.since, until: f.until, limit: f.limit }
  if (f.dryRun) {
    const matched = await countBulkEvents(ctx.deps.db, filter)
    return {
      status: 200,
      body: { action, dryRun: true, matched, changed: 0, skipped: 0, limit: f.limit, limitReached: matched === f.limit, signalled: false },
    }
  }
  const deps = { db: ctx.deps.db, signals: ctx.deps.signals }
  let result
  let signalled = false
  if (action === 'retry') {
    const retried = await retryMany(deps, filter)
    signalled = reportSignal(ctx, project, 'bulk retry', retried.signal)
    result = retried
  } else result = await stopMany(deps, filter)
  const { matched, changed, skipped, limitReached } = result
  // At the limit, more may match: the same call again takes the oldest that still do.
  return { status: 200, body: { action, dryRun: false, matched, changed, skipped, limit: f.limit, limitReached, signalled } }
}

/** The bulk event routes. */
export const bulkRoutes: Route[] = [
  { method: 'POST', path: '/v1/projects/:project/events/retry', need: 'admin', handle: bulk('retry') },
  { method: 'POST', path: '/v1/projects/:project/events/stop', need: 'admin', handle: bulk('stop') },
]

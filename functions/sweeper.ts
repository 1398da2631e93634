import middy from '@middy/core'
import type { Context } from 'aws-lambda'
import { sweep, type SweepResult } from '../lib/sweeper/sweep.js'
import {
  closeIdleConnections,
  coldStartDeps,
  flushMetricsAfter,
  flushSpansAfter,
  forInvocation,
  renewSecretAfterRefusal,
  type DepsSource,
} from './runtime.js'

/** Builds the sweeper handler over its dependencies; the deployed one uses the cold-start ones. */
export const createHandler = (source: DepsSource, hooks: { onSweep?: (result: SweepResult) => void } = {}) =>
  middy(async (_event: unknown, context: Context) => {
    const deps = forInvocation(await source(), context)
    const result = await sweep(deps, { remainingMs: () => context.getRemainingTimeInMillis(), ownInstance: deps.sinks.instance })
    hooks.onSweep?.(result)
    // One pass a minute: its connections would sit idle (frozen) until the next one.
    await closeIdleConnections(deps.db)
    return {
      projects: result.projects.length,
      signals: result.signals,
      deletedResolved: result.deletedResolved,
      deletedGroups: result.deletedGroups,
    }
  })
    .use(renewSecretAfterRefusal())
    .use(flushMetricsAfter(source))
    .use(flushSpansAfter(source))

/** Scheduled every minute (EventBridge rate(1 minute)). */
export const handler = createHandler(coldStartDeps)

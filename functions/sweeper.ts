import middy from '@middy/core'
import type { Context } from 'aws-lambda'
import { lambdaRuntime, pushMetricsAfter, type RuntimeSource } from '../lib/lambda.js'
import { sweep, type SweepResult } from '../lib/sweeper/sweep.js'

/** Builds the sweeper handler over a runtime; the deployed one uses the cold-start runtime. */
export const createHandler = (runtime: RuntimeSource, hooks: { onSweep?: (result: SweepResult) => void } = {}) =>
  middy(async (_event: unknown, context: Context) => {
    const { deps, pusher, cloudwatch } = await runtime()
    const result = await sweep(deps, { remainingMs: () => context.getRemainingTimeInMillis(), ownInstance: pusher.instance })
    await cloudwatch?.putGauges(result.gauges)
    hooks.onSweep?.(result)
    return { projects: result.projects.length, signals: result.signals, deletedResolved: result.deletedResolved, deletedGroups: result.deletedGroups }
  }).use(pushMetricsAfter(runtime))

/** Scheduled every minute (EventBridge rate(1 minute)). */
export const handler = createHandler(lambdaRuntime)

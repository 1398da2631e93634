import middy from '@middy/core'
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure'
import type { Context, SQSEvent } from 'aws-lambda'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { handleSignals } from '../lib/dispatch/sqs.js'
import { lambdaRuntime, pushMetricsAfter, type RuntimeSource } from '../lib/lambda.js'

/** Builds the dispatch handler over a runtime; the deployed one uses the cold-start runtime. */
export const createHandler = (runtime: RuntimeSource, hooks: Pick<DrainOptions, 'onBatch'> = {}) =>
  middy(async (event: SQSEvent, context: Context) =>
    handleSignals((await runtime()).deps, event.Records, { ...hooks, remainingMs: () => context.getRemainingTimeInMillis() }))
    // Our own log line names the project; the middleware's console dump of the error would not be JSON.
    .use(sqsPartialBatchFailure({ logger: () => {} }))
    .use(pushMetricsAfter(runtime))

/** Triggered by the signal queue with ReportBatchItemFailures. */
export const handler = createHandler(lambdaRuntime)

import middy from '@middy/core'
import { enqueue, type EnqueueResult } from '../lib/enqueue.js'
import { lambdaRuntime, pushMetricsAfter, type RuntimeSource } from '../lib/lambda.js'

/** Builds the enqueue handler over a runtime; the deployed one uses the cold-start runtime. */
export const createHandler = (runtime: RuntimeSource) =>
  middy(async (event: unknown): Promise<EnqueueResult> => enqueue((await runtime()).deps, event)).use(pushMetricsAfter(runtime))

/** Invoked directly by content APIs with `{ project, transactionId, events: [...] }`. */
export const handler = createHandler(lambdaRuntime)

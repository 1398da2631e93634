import middy from '@middy/core'
import { enqueue, type EnqueueResult } from '../lib/enqueue.js'
import { lambdaRuntime, pushMetricsAfter, type Runtime } from '../lib/lambda.js'

/** Builds the enqueue handler over a runtime; the deployed one uses the cold-start runtime. */
export const createHandler = (runtime: () => Runtime) =>
  middy(async (event: unknown): Promise<EnqueueResult> => enqueue(runtime().deps, event)).use(pushMetricsAfter(runtime))

/** Invoked directly by content APIs with `{ project, transactionId, events: [...] }`. */
export const handler = createHandler(lambdaRuntime)

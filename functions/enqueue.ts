import middy from '@middy/core'
import type { Context } from 'aws-lambda'
import { enqueue } from '../lib/enqueue.js'
import { type EnqueueResult } from '../lib/enqueue/within.js'
import { coldStartDeps, flushMetricsAfter, flushSpansAfter, forInvocation, renewSecretAfterRefusal, type DepsSource } from './runtime.js'

/** Builds the enqueue handler over its dependencies; the deployed one uses the cold-start ones. */
export const createHandler = (source: DepsSource) =>
  middy(async (event: unknown, context: Context): Promise<EnqueueResult> => enqueue(forInvocation(await source(), context), event))
    .use(renewSecretAfterRefusal())
    // A content API waits on this invocation: its counters go by EMF, the Pushgateway push is not awaited.
    .use(flushMetricsAfter(source, { push: 'background' }))
    .use(flushSpansAfter(source))

/** Invoked directly by content APIs with `{ project, transactionId, events: [...] }`. */
export const handler = createHandler(coldStartDeps)

import middy from '@middy/core'
import type { Context } from 'aws-lambda'
import { createRelayMetrics } from '../lib/metrics/relay.js'
import { scheduledRelayPass, type PassResult } from '../lib/relay/once.js'
import { closeIdleConnections, coldStartDeps, flushMetricsAfter, forInvocation, type DepsSource } from './runtime.js'

// One registry per execution environment: the pass's counters live as long as it does.
const relayMetrics = createRelayMetrics()

/** Builds the relay handler over its dependencies; the deployed one uses the cold-start ones. */
export const createHandler = (source: DepsSource) =>
  middy(async (_event: unknown, context: Context): Promise<{ projects: PassResult[] }> => {
    const deps = forInvocation(await source(), context)
    const projects = await scheduledRelayPass({ ...deps, actions: deps.db, metrics: relayMetrics }, () =>
      context.getRemainingTimeInMillis(),
    )
    // One pass a minute: its connections would sit idle (frozen) until the next one.
    await closeIdleConnections(deps.db)
    return { projects }
  }).use(flushMetricsAfter(source))

/** Scheduled every minute (EventBridge rate(1 minute)), for a stage without a long-running relay. */
export const handler = createHandler(coldStartDeps)

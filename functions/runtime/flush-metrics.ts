// middy middleware, one job: flush this environment's metrics to every enabled sink after every invocation.
import type middy from '@middy/core'
import type { Context } from 'aws-lambda'
import type { DepsSource } from './cold-start.js'
import { forInvocation } from './invocation.js'
import { invocationDeps } from './source.js'

/**
 * Flushes the metrics after every invocation, success or failure; `push: 'background'` leaves the
 * Pushgateway push unawaited (see MetricSinks.flush). The sinks log and swallow their own failures:
 * none fails the invocation.
 */
export function flushMetricsAfter(
  source: DepsSource,
  opts: { push: 'await' | 'background' } = { push: 'await' },
): middy.MiddlewareObj<unknown, unknown, Error, Context> {
  const flush = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    const deps = await invocationDeps(source)
    if (!deps) return
    await deps.sinks.flush(forInvocation(deps, request.context).log, opts)
  }
  return { after: flush, onError: flush }
}

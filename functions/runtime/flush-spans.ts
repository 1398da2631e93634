// middy middleware, one job: export this environment's finished spans after every invocation.
import type middy from '@middy/core'
import type { Context } from 'aws-lambda'
import type { DepsSource } from './cold-start.js'
import { forInvocation } from './invocation.js'
import { invocationDeps } from './source.js'

/**
 * Flushes the spans after every invocation, success or failure, bounded by TRACES_FLUSH_TIMEOUT_MS;
 * spans a collector lost are counted (`traceSpansDropped`), so register it after flushMetricsAfter:
 * middy runs `after` hooks last-registered first, and the count then reaches this invocation's push.
 */
export function flushSpansAfter(source: DepsSource): middy.MiddlewareObj<unknown, unknown, Error, Context> {
  const flush = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    const deps = await invocationDeps(source)
    if (!deps) return
    await deps.tracing.flush(forInvocation(deps, request.context).log, spans => deps.metrics.traceSpansDropped.inc(spans))
  }
  return { after: flush, onError: flush }
}

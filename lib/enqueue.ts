import { ROOT_CONTEXT, SpanKind, type Span } from '@opentelemetry/api'
import type { Deps } from './deps.js'
import { MAX_TRACEPARENT_CHARS, MAX_TRACESTATE_CHARS } from './enqueue/request.js'
import { enqueueWithin, type EnqueueResult, type EventTrace } from './enqueue/within.js'
import { carrierOf, incomingContext, type TraceCarrier } from './tracing/context.js'
import { spanIds } from './tracing/tracing.js'

// The enqueue Lambda's path. Producers that hold their own Postgres transaction call enqueueWithin
// (lib/enqueue/within.ts), then signalAfterCommit; both share one validation and one insert.

/**
 * Validates the whole request, writes its events in one statement, then signals the project's queue.
 * `headers`: an HTTP caller's traceparent/tracestate, used when the request body carries none.
 */
export async function enqueue(deps: Deps, input: unknown, headers?: TraceCarrier): Promise<EnqueueResult> {
  const { tracing } = deps
  if (!tracing.enabled) return enqueueAndSignal(deps, input)
  // The producer's context parents the span (TRACES_ACCEPT_INCOMING=all); its events keep the span's own.
  const parent = (tracing.acceptIncoming ? incomingContext(producerContext(input, headers)) : undefined) ?? ROOT_CONTEXT
  return tracing.span(
    'actions.enqueue',
    { kind: SpanKind.SERVER },
    async span => {
      const result = await enqueueAndSignal({ ...deps, log: deps.log.child(spanIds(span)) }, input, carrierOf(span), span)
      span.setAttributes({ 'contember.actions.events': result.eventIds.length, 'contember.actions.written': result.written })
      return result
    },
    parent,
  )
}

async function enqueueAndSignal(deps: Deps, input: unknown, trace?: EventTrace, span?: Span): Promise<EnqueueResult> {
  const { project, ...result } = await enqueueWithin(deps.db, input, { trace })
  span?.setAttribute('contember.actions.project', project)
  deps.metrics.forProject(project).enqueued(result.written)
  if (result.eventIds.length > 0) {
    try {
      await deps.signals.send(project)
    } catch (error) {
      // The events are committed; the sweeper re-drives them within a minute.
      deps.log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { project, events: result.written, error })
    }
  }
  return result
}

/**
 * The producer's context: the request's own `traceparent`/`tracestate` fields, else the HTTP headers.
 * Read before validation (the span must exist while the request is checked), so only strings within
 * the request schema's bounds are taken; the schema then refuses anything else.
 */
function producerContext(input: unknown, headers: TraceCarrier | undefined): TraceCarrier | undefined {
  const field = (name: 'traceparent' | 'tracestate', max: number) => {
    const v = typeof input === 'object' && input !== null && name in input ? (input as Record<string, unknown>)[name] : undefined
    return typeof v === 'string' && v.length <= max ? v : undefined
  }
  const own = field('traceparent', MAX_TRACEPARENT_CHARS)
  if (own !== undefined) return { traceparent: own, tracestate: field('tracestate', MAX_TRACESTATE_CHARS) }
  const traceparent = headers?.traceparent
  if (traceparent === undefined || traceparent.length > MAX_TRACEPARENT_CHARS) return undefined
  const tracestate = headers?.tracestate
  return { traceparent, tracestate: tracestate !== undefined && tracestate.length <= MAX_TRACESTATE_CHARS ? tracestate : undefined }
}

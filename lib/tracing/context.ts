import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, trace, type Context, type Link, type Span } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'

// W3C Trace Context in and out, by the SDK's own propagator: a producer's headers or payload fields
// into a parent context, a span into the text stored with each event, stored text into span links.

/** A W3C trace context as text: `traceparent` and, when there is one, `tracestate`. */
export type TraceCarrier = { traceparent?: string | undefined; tracestate?: string | undefined }

const propagator = new W3CTraceContextPropagator()

/** The remote parent context `carrier` describes, or undefined when it holds no valid traceparent (W3C: then it is ignored). */
export function incomingContext(carrier: TraceCarrier | undefined): Context | undefined {
  if (carrier?.traceparent === undefined) return undefined
  const ctx = propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter)
  return trace.getSpanContext(ctx) === undefined ? undefined : ctx
}

/** `span`'s context as W3C text (its tracestate is the producer's, which a child span inherits). */
export function carrierOf(span: Span): { traceparent: string; tracestate: string | null } | undefined {
  const out: Record<string, string> = {}
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), out, defaultTextMapSetter)
  return out.traceparent === undefined ? undefined : { traceparent: out.traceparent, tracestate: out.tracestate ?? null }
}

/** The SDK's default bound on links per span; a batch names at most this many distinct producer contexts. */
export const MAX_LINKS = 128

/** One link per distinct stored context among `events`, at most {@link MAX_LINKS}; stored text that does not parse is skipped. */
export function linksOf(events: ReadonlyArray<{ traceparent?: string | null; tracestate?: string | null }>): Link[] {
  const links: Link[] = []
  const seen = new Set<string>()
  for (const e of events) {
    if (!e.traceparent || seen.has(e.traceparent)) continue
    seen.add(e.traceparent)
    const ctx = incomingContext({ traceparent: e.traceparent, tracestate: e.tracestate ?? undefined })
    const spanContext = ctx && trace.getSpanContext(ctx)
    if (spanContext) links.push({ context: spanContext })
    if (links.length >= MAX_LINKS) break
  }
  return links
}

/**
 * The headers a webhook request carries under TRACES_TO_WEBHOOKS: the webhook span's `traceparent`,
 * and the producer's `tracestate` when the batch's first traced event had one. None when the target
 * sets its own `traceparent` (upstream's rule: the target's header wins, and nothing is added beside it).
 */
export function webhookTraceHeaders(
  span: Span,
  targetHeaders: Readonly<Record<string, string>>,
  events: ReadonlyArray<{ tracestate?: string | null }>,
): Record<string, string> {
  // The address's headers keep the schema's spelling (lib/delivery/webhook.ts requestHeaders): any spelling counts.
  for (const name of Object.keys(targetHeaders)) if (name.toLowerCase() === 'traceparent') return {}
  const own = carrierOf(span)
  if (!own || !trace.isSpanContextValid(span.spanContext())) return {}
  const tracestate = events.find(e => e.tracestate)?.tracestate
  return tracestate ? { traceparent: own.traceparent, tracestate } : { traceparent: own.traceparent }
}

import { SpanKind, SpanStatusCode, type Context, type Span } from '@opentelemetry/api'
import type { Delivery, Endpoint } from '../delivery/webhook.js'
import type { ClaimedEvent } from '../events.js'
import type { Logger } from '../log.js'
import { linksOf, webhookTraceHeaders } from '../tracing/context.js'
import { spanIds, type Tracing } from '../tracing/tracing.js'

/** What one traced delivery is about: the target, its batch, the drain's logger and span. */
export type TracedDelivery = { endpoint: Endpoint; events: readonly ClaimedEvent[]; log: Logger; parent?: Context | undefined }

/** The trace headers a request adds, given the target's own (TRACES_TO_WEBHOOKS). */
export type TraceHeaders = (targetHeaders: Readonly<Record<string, string>>) => Record<string, string>

/**
 * Runs one delivery in a `webhook` client span: a child of the drain's `actions.dispatch` span, linked
 * to the context each event was enqueued in (so the mutation's trace finds its webhook). Attributes
 * name the target and count; never its URL, a header or a variable value (upstream's rule too).
 * `deliver` gets a logger whose lines carry the span's ids, and the trace headers to add under TRACES_TO_WEBHOOKS.
 */
export async function webhookSpan(
  tracing: Tracing,
  { endpoint, events, log, parent }: TracedDelivery,
  deliver: (log: Logger, traceHeaders?: TraceHeaders) => Promise<Delivery>,
): Promise<Delivery> {
  const attributes = { 'contember.actions.target': endpoint.target.name, 'contember.actions.events': events.length }
  const options = { kind: SpanKind.CLIENT, attributes, links: linksOf(events) }
  return tracing.span(
    'webhook',
    options,
    async span => {
      const headers: TraceHeaders | undefined = tracing.toWebhooks ? own => webhookTraceHeaders(span, own, events) : undefined
      const delivery = await deliver(log.child(spanIds(span)), headers)
      describeOutcome(span, delivery)
      return delivery
    },
    parent,
  )
}

/** The answer's status code, and what the batch came to: `delivered`, `partial`, or the first failure's kind. */
function describeOutcome(span: Span, { outcomes }: Delivery): void {
  let ok = 0
  let failed: string | undefined
  let status: number | undefined
  for (const o of outcomes.values()) {
    status ??= o.code
    if (o.ok) ok++
    else failed ??= o.kind ?? 'rejected'
  }
  if (status !== undefined) span.setAttribute('http.response.status_code', status)
  const outcome = failed === undefined ? 'delivered' : ok > 0 ? 'partial' : failed
  span.setAttribute('contember.actions.outcome', outcome)
  // The kind only: a receiver's error text may quote what it was sent.
  if (ok === 0 && failed !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: failed })
}

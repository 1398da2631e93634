import {
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Context,
  type Span,
  type SpanOptions,
  type Tracer,
} from '@opentelemetry/api'
import { ExportResultCode } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace'
import type { Logger } from '../log.js'
import { tracesUrl, type TracingConfig } from './config.js'

/**
 * This environment's tracing: the OpenTelemetry SDK's tracer provider, batch processor and OTLP/HTTP
 * exporter when an endpoint is configured, nothing at all otherwise ({@link Tracing.span} then just
 * runs its function). Spans carry names, counts and statuses only: never a URL, a header or a
 * variable value (docs/operations.md, Tracing).
 *
 * Parents are passed, never looked up: no context manager is registered. On Node 22 the
 * AsyncLocalStorage one hooks every promise of the process once enabled, about 30 µs per delivered
 * event at batchSize 1 whatever the sampler (bench/README.md); a span's context goes to its children
 * as an argument instead, and log lines get the ids through a child logger ({@link spanIds}).
 */
export type Tracing = {
  readonly enabled: boolean
  /** TRACES_ACCEPT_INCOMING=all: a producer's traceparent parents the enqueue span. */
  readonly acceptIncoming: boolean
  /** TRACES_TO_WEBHOOKS: webhook requests carry the webhook span's traceparent. */
  readonly toWebhooks: boolean
  /** OTEL_ACTIONS_SQL: claim and record statements get a span each. */
  readonly sql: boolean
  /**
   * Runs `fn` in a new span under `parent` (default: a new trace) and ends it, marking a throw as an
   * error; `fn` gets the span and its context, the parent to hand to child spans.
   */
  span<T>(name: string, options: SpanOptions, fn: (span: Span, ctx: Context) => Promise<T>, parent?: Context): Promise<T>
  /** Exports the spans ended so far, waiting at most TRACES_FLUSH_TIMEOUT_MS; counts spans known lost. Never throws. */
  flush(log: Logger, dropped: (spans: number) => void): Promise<void>
  /** Flushes and stops the exporter (local runs and tests; Lambda freezes instead). Never throws. */
  shutdown(): Promise<void>
}

/** A span that records nothing, for code paths that run the same with tracing off. */
export const NO_SPAN: Span = trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: TraceFlags.NONE })

/** Tracing off: every call is as cheap as calling the function. */
export const noTracing: Tracing = {
  enabled: false,
  acceptIncoming: false,
  toWebhooks: false,
  sql: false,
  span: (_name, _options, fn) => fn(NO_SPAN, ROOT_CONTEXT),
  flush: async () => {},
  shutdown: async () => {},
}

/** Builds this environment's tracing from the config: {@link noTracing} unless an OTLP endpoint is set. */
export function createTracing(config: TracingConfig): Tracing {
  const url = tracesUrl(config)
  if (url === undefined) return noTracing
  const boundMs = config.TRACES_FLUSH_TIMEOUT_MS
  const counts = { ended: 0, exported: 0, counted: 0 }
  // The exporter's timeout is the flush bound: a collector that never answers fails each export then.
  const exporter = counting(new OTLPTraceExporter({ url, timeoutMillis: boundMs }), counts)
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.OTEL_SERVICE_NAME }),
    sampler: samplerOf(config),
    spanProcessors: [endedCounter(counts), new BatchSpanProcessor({ exporter, exportTimeoutMillis: boundMs })],
  })
  const tracer = provider.getTracer('contember-actions')
  return {
    enabled: true,
    acceptIncoming: config.TRACES_ACCEPT_INCOMING === 'all',
    toWebhooks: config.TRACES_TO_WEBHOOKS,
    sql: config.OTEL_ACTIONS_SQL,
    span: (name, options, fn, parent) => inSpan(tracer, name, options, fn, parent),
    flush: async (log, dropped) => {
      const done = await within(provider.forceFlush({ timeoutMillis: boundMs }), boundMs)
      // After a flush that finished, nothing is queued: every sampled span ended was exported or is lost.
      const lost = counts.ended - counts.exported - counts.counted
      if (done && lost > 0) {
        counts.counted += lost
        dropped(lost)
        log.warn('Trace spans were dropped: the collector did not take them', { spans: lost })
      } else if (!done)
        log.warn('Trace export did not finish within TRACES_FLUSH_TIMEOUT_MS; the next flush counts what it lost', { spans: lost })
    },
    shutdown: async () => {
      await within(provider.shutdown(), boundMs)
    },
  }
}

async function inSpan<T>(
  tracer: Tracer,
  name: string,
  options: SpanOptions,
  fn: (span: Span, ctx: Context) => Promise<T>,
  parent: Context = ROOT_CONTEXT,
): Promise<T> {
  const span = tracer.startSpan(name, options, parent)
  try {
    return await fn(span, trace.setSpan(parent, span))
  } catch (error) {
    // The error's name only: messages of drivers and SDKs may quote a URL or a value.
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' })
    throw error
  } finally {
    span.end()
  }
}

/** The fields that join a log line to `span` (W3C hex ids), for a child logger; none for a span that records nothing. */
export function spanIds(span: Span): { trace_id: string; span_id: string } | Record<string, never> {
  const ctx = span.spanContext()
  return isSpanContextValid(ctx) ? { trace_id: ctx.traceId, span_id: ctx.spanId } : {}
}

function samplerOf(config: TracingConfig): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.OTEL_TRACES_SAMPLER_ARG)
  switch (config.OTEL_TRACES_SAMPLER) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return ratio()
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() })
  }
}

type Counts = { ended: number; exported: number; counted: number }

/** Counts sampled spans as they end (the batch processor takes exactly those). */
function endedCounter(counts: Counts): SpanProcessor {
  return {
    onStart: () => {},
    onEnd: (span: ReadableSpan) => {
      if (span.spanContext().traceFlags & TraceFlags.SAMPLED) counts.ended++
    },
    forceFlush: async () => {},
    shutdown: async () => {},
  }
}

/** The exporter, counting the spans it delivered; the rest of what ended is what the collector never took. */
function counting(exporter: SpanExporter, counts: Counts): SpanExporter {
  return {
    export: (spans, done) =>
      exporter.export(spans, result => {
        if (result.code === ExportResultCode.SUCCESS) counts.exported += spans.length
        done(result)
      }),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  }
}

/** True when `work` settles within `ms`; false when the bound came first (the work goes on unawaited). */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const bound = new Promise<false>(resolve => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      bound,
    ])
  } finally {
    clearTimeout(timer)
  }
}

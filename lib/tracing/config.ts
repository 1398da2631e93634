import { z } from 'zod'

// The tracing keys of lib/config.ts's schema. The OTEL_* names and meanings are the OpenTelemetry
// specification's (sdk-environment-variables); the TRACES_* ones are this engine's, after upstream's
// `telemetry.traces` options. Tracing is off unless an OTLP endpoint is set (docs/operations.md, Tracing).

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
  .transform(v => v === 'true' || v === '1' || v === 'yes')

/** The samplers of OTEL_TRACES_SAMPLER that need no extension (jaeger_remote and xray do; they are refused). */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const

export const tracingConfigShape = {
  /** Base URL of an OTLP/HTTP collector (`/v1/traces` is appended); setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ message: 'expected a URL' }).optional(),
  /** The full traces URL (nothing appended); wins over OTEL_EXPORTER_OTLP_ENDPOINT and turns tracing on too. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ message: 'expected a URL' }).optional(),
  /** true turns tracing off whatever endpoint is set (the specification's kill switch). */
  OTEL_SDK_DISABLED: bool.default(false),
  OTEL_SERVICE_NAME: z.string().min(1).max(255).default('contember-actions'),
  OTEL_TRACES_SAMPLER: z.enum(SAMPLERS, { message: `expected one of ${SAMPLERS.join(', ')}` }).default('parentbased_always_on'),
  /** The ratio of the traceidratio samplers, from 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ message: 'expected a ratio from 0 to 1' })
    .min(0, 'expected a ratio from 0 to 1')
    .max(1, 'expected a ratio from 0 to 1')
    .default(1),
  /**
   * Longest an invocation waits for its spans to be exported at its end, and the exporter's request
   * timeout: a collector that never answers costs an invocation at most this, and its spans are counted dropped.
   */
  TRACES_FLUSH_TIMEOUT_MS: z.coerce
    .number({ message: 'expected a positive integer' })
    .int('expected a positive integer')
    .positive('expected a positive integer')
    .default(1_000),
  /** `all`: a producer's W3C traceparent/tracestate (payload field or HTTP header) parents the enqueue span; `none`: ignored. */
  TRACES_ACCEPT_INCOMING: z.enum(['all', 'none'], { message: 'expected all or none' }).default('all'),
  /** Sends each webhook request's `traceparent` (and the producer's `tracestate`), as upstream's propagateToWebhooks. */
  TRACES_TO_WEBHOOKS: bool.default(false),
  /** Adds a span per claim and record statement, named by the statement (never its values). */
  OTEL_ACTIONS_SQL: bool.default(false),
}

const tracingConfigSchema = z.object(tracingConfigShape)
export type TracingConfig = z.output<typeof tracingConfigSchema>

/** The traces URL the config names, or undefined when tracing is off. */
export function tracesUrl(config: TracingConfig): string | undefined {
  if (config.OTEL_SDK_DISABLED) return undefined
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  const base = config.OTEL_EXPORTER_OTLP_ENDPOINT
  return base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`
}

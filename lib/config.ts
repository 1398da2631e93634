import { z } from 'zod'
import { DEFAULT_RECORD_SETTINGS, type RecordSettings } from './db/health.js'
import { parseNetworks } from './delivery/egress.js'
import { ConfigError, describeCause, ValidationError } from './errors.js'
import {
  DEFAULT_GRAPHQL_ANSWER_BYTES,
  DEFAULT_MAX_TARGET_TIMEOUT_MS,
  MAX_RELAY_BATCH_SIZE,
  MAX_RELAY_POLL_MS,
  MIN_RELAY_POLL_MS,
} from './schema/limits.js'
import { tracingConfigShape } from './tracing/config.js'

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
  .transform(v => v === 'true' || v === '1' || v === 'yes')

const positiveInt = (fallback: number) =>
  z.coerce
    .number({ message: 'expected a positive integer' })
    .int('expected a positive integer')
    .positive('expected a positive integer')
    .default(fallback)

const nonNegativeInt = (fallback: number) =>
  z.coerce
    .number({ message: 'expected a non-negative integer' })
    .int('expected a non-negative integer')
    .min(0, 'expected a non-negative integer')
    .default(fallback)

const url = z.url({ message: 'expected a URL' })

/** Every environment variable the functions read, with its default. docs/configuration.md mirrors this (test/docs/configuration.test.ts checks it). */
export const configSchema = z.object({
  DATABASE_URL: url,
  /** Name of an SSM SecureString holding DATABASE_URL; read at cold start when DATABASE_URL is unset (deployed stages). */
  DATABASE_URL_SSM_PARAMETER: z.string().startsWith('/', 'expected an SSM parameter name starting with /').optional(),
  SIGNAL_QUEUE_URL: url,
  AWS_REGION: z.string().min(1).default('us-east-1'),
  /**
   * Bounded waits on SQS (every wait has a bound): one attempt gives up after SQS_REQUEST_TIMEOUT_MS (connecting
   * included, at most SQS_CONNECT_TIMEOUT_MS of it), and a send makes at most SQS_MAX_ATTEMPTS, so an
   * endpoint that never answers costs about attempts x request timeout. The defaults keep that well
   * inside enqueue's 30 s and the sweeper's 55 s; a send that fails is logged, the sweeper re-drives.
   */
  SQS_CONNECT_TIMEOUT_MS: positiveInt(1_000),
  SQS_REQUEST_TIMEOUT_MS: positiveInt(3_000),
  SQS_MAX_ATTEMPTS: z.coerce
    .number({ message: 'expected an integer from 1 to 5' })
    .int('expected an integer from 1 to 5')
    .min(1, 'expected an integer from 1 to 5')
    .max(5, 'expected an integer from 1 to 5')
    .default(2),
  PUSHGATEWAY_URL: url.optional(),
  /** A project that receives the engine's operational events (target.paused, target.needs_operator, target.resumed, events.gave_up; lib/ops.ts). */
  OPS_PROJECT: z.string().min(1).max(255).optional(),
  PUSHGATEWAY_TIMEOUT_MS: positiveInt(2_000),
  /** Grouping-key value for this execution environment's counters; Lambda's log stream name is unique per environment. */
  METRICS_INSTANCE: z.string().min(1).optional(),
  /** The `stage` dimension of every EMF document (the template sets the deployment stage), so stages can share an account and namespace. */
  METRICS_STAGE: z.string().min(1).max(255).optional(),
  AWS_LAMBDA_LOG_STREAM_NAME: z.string().optional(),
  METRICS_STALE_GROUP_SECONDS: positiveInt(900),
  CLOUDWATCH_METRICS: bool.default(false),
  CLOUDWATCH_NAMESPACE: z.string().min(1).default('Contember/Actions'),
  DB_POOL_MAX: positiveInt(10),
  /**
   * Longest one Postgres statement may run (or wait for a lock) in the functions; then it fails (57014)
   * and the invocation goes on with what it has. Every statement they send takes milliseconds. With
   * DB_PREPARED_STATEMENTS on, the server enforces it (statement_timeout in the startup packet); off,
   * the client does: when a statement outlives it, the client sends Postgres' cancel request, which a
   * pooler forwards to the server running the statement (docs/database.md).
   */
  DB_STATEMENT_TIMEOUT_MS: positiveInt(30_000),
  /**
   * false for a transaction pooler (PgBouncer in transaction mode, RDS Proxy): every statement goes
   * unnamed, and no startup parameter a stock pooler refuses is sent (the statement timeout travels as
   * a client-side cancel instead). Functions, the CLI and the local stack read it.
   */
  DB_PREPARED_STATEMENTS: bool.default(true),
  /**
   * Turns on TLS that verifies the database's certificate (CA and host name, libpq's verify-full) for
   * every client, whatever the URL's sslmode: a PEM file path, or `rds` for the Amazon RDS CA bundle
   * shipped with the package (vendor/rds-ca-bundle.ts). Needed on Lambda's Node 20+ runtimes, which do not
   * trust Amazon's RDS CAs by default. Empty: unset (the URL's own TLS parameters apply).
   */
  DATABASE_CA: z.string().min(1).optional(),
  /** Batches in flight at once within one dispatch invocation. */
  DISPATCH_CONCURRENCY: positiveInt(8),
  /** Stop draining when less than (next target's timeout + this margin) remains of the invocation. */
  DISPATCH_TIME_MARGIN_MS: nonNegativeInt(5_000),
  /**
   * Longest `timeoutMs` a target may set; keep it below the dispatch function's timeout minus
   * DISPATCH_TIME_MARGIN_MS. A stored target above it is held back at dispatch, never run.
   */
  MAX_TARGET_TIMEOUT_MS: positiveInt(DEFAULT_MAX_TARGET_TIMEOUT_MS),
  /** A claim lease lasts the target's timeout plus this margin. */
  LEASE_MARGIN_MS: positiveInt(30_000),
  /**
   * Payload bytes (serialized) one drain may hold in claimed events, queued and in flight. Parsed
   * events and request bodies cost a few times their payload bytes, so 64 MiB leaves a 512 MB
   * function room to spare. A single batch larger than this is still taken when nothing else is held.
   */
  DISPATCH_MAX_CLAIMED_BYTES: positiveInt(64 * 1024 * 1024),
  /**
   * Longest time one project's drain claims for within a dispatch invocation before it yields and
   * leaves a continuation signal, so a deep backlog cannot keep the other projects of the batch waiting.
   */
  DISPATCH_PROJECT_SLICE_MS: positiveInt(5_000),
  /** How many dispatch invocations may run at once (the SQS event source's maximumConcurrency). */
  DISPATCH_MAX_CONCURRENCY: positiveInt(4),
  /** Due events per extra signal the sweeper sends for one project. */
  SWEEPER_EVENTS_PER_SIGNAL: positiveInt(500),
  // 0 keeps every event, as upstream does.
  RETENTION_DAYS: nonNegativeInt(7),
  RETENTION_INCLUDE_FAILED: bool.default(false),
  RETENTION_BATCH_SIZE: positiveInt(5_000),
  /**
   * Events of a target paused longer than this (hours, a decimal so tests can scale it down) fail
   * terminally, counted, with the pause in their log; 0 waits forever. The sweeper applies it.
   */
  PAUSED_GIVE_UP_HOURS: z.coerce
    .number({ message: 'expected a number of hours (0 = never)' })
    .min(0, 'expected a number of hours (0 = never)')
    .default(72),
  /**
   * Failed batches in a row (nothing delivered, no 2xx) that pause a target (the circuit breaker). 0 turns
   * the breaker off: upstream's rule, a dead target fails its events after maxAttempts.
   */
  BREAKER_FAILURES: nonNegativeInt(DEFAULT_RECORD_SETTINGS.breakerFailures),
  /**
   * The share of a target's recent batches (BREAKER_WINDOW_MS) that must have failed as well, for its
   * BREAKER_FAILURES failed batches in a row to pause it: a flaky receiver's runs of bad luck do not,
   * a dead receiver's do. 1 pauses only a target that failed everything in its window.
   */
  BREAKER_FAILURE_RATE: z.coerce
    .number({ message: 'expected a fraction above 0, at most 1' })
    .gt(0, 'expected a fraction above 0, at most 1')
    .max(1, 'expected a fraction above 0, at most 1')
    .default(DEFAULT_RECORD_SETTINGS.breakerRate),
  /** How far back the breaker's failure rate looks: about this long, and never past twice it. */
  BREAKER_WINDOW_MS: positiveInt(DEFAULT_RECORD_SETTINGS.breakerWindowMs),
  /** First probe interval of a paused target; it doubles after each failed probe up to BREAKER_PROBE_MAX_MS. */
  BREAKER_PROBE_MS: positiveInt(DEFAULT_RECORD_SETTINGS.probeMs),
  BREAKER_PROBE_MAX_MS: positiveInt(DEFAULT_RECORD_SETTINGS.probeMaxMs),
  /** Longest delay a receiver's Retry-After (on 429 and 503) can impose, so a hostile value cannot park events. */
  RETRY_AFTER_MAX_MS: positiveInt(DEFAULT_RECORD_SETTINGS.retryAfterMaxMs),
  /** Retry delays are stretched by up to this fraction at random; 0 keeps upstream's exact timing. */
  RETRY_JITTER: z.coerce
    .number({ message: 'expected a fraction from 0 to 1' })
    .min(0, 'expected a fraction from 0 to 1')
    .max(1, 'expected a fraction from 0 to 1')
    .default(0),
  /** Bytes of one answer of the GraphQL Actions API at most; past it the answer is an error, never cut. */
  GRAPHQL_MAX_ANSWER_BYTES: positiveInt(DEFAULT_GRAPHQL_ANSWER_BYTES),
  /**
   * CIDR ranges (comma or space separated) the egress guard lets deliveries reach although they are
   * private, loopback or otherwise blocked; empty by default. The local stack and tests allow loopback.
   */
  WEBHOOK_ALLOWED_NETWORKS: z
    .string()
    .default('')
    .superRefine((list, ctx) => {
      const { invalid } = parseNetworks(list)
      if (invalid.length)
        ctx.addIssue({
          code: 'custom',
          message: `expected CIDR ranges such as 10.0.0.0/8 or fd00::/8, comma or space separated (entry ${invalid.join(', ')} is not one)`,
        })
    }),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  /**
   * The Contember relay (docs/contember-relay.md): the project databases it moves outbox rows from,
   * comma-separated, each `postgres://…/<slug>` or `<project>=postgres://…`. Holds passwords: keep it
   * in SSM. Unset: the relay function has nothing to do.
   */
  RELAY_SOURCES: z.string().min(1).optional(),
  /** Outbox rows the relay moves per batch (one Actions transaction, one outbox transaction). */
  RELAY_BATCH_SIZE: z.coerce
    .number({ message: `expected an integer from 1 to ${MAX_RELAY_BATCH_SIZE}` })
    .int(`expected an integer from 1 to ${MAX_RELAY_BATCH_SIZE}`)
    .min(1, `expected an integer from 1 to ${MAX_RELAY_BATCH_SIZE}`)
    .max(MAX_RELAY_BATCH_SIZE, `expected an integer from 1 to ${MAX_RELAY_BATCH_SIZE}`)
    .default(100),
  /** Longest wait of a long-running relay between looks at an idle outbox (it also wakes on LISTEN). */
  RELAY_POLL_INTERVAL_MS: z.coerce
    .number({ message: `expected milliseconds from ${MIN_RELAY_POLL_MS} to ${MAX_RELAY_POLL_MS}` })
    .int(`expected milliseconds from ${MIN_RELAY_POLL_MS} to ${MAX_RELAY_POLL_MS}`)
    .min(MIN_RELAY_POLL_MS, `expected milliseconds from ${MIN_RELAY_POLL_MS} to ${MAX_RELAY_POLL_MS}`)
    .max(MAX_RELAY_POLL_MS, `expected milliseconds from ${MIN_RELAY_POLL_MS} to ${MAX_RELAY_POLL_MS}`)
    .default(5_000),
  /** false behind a transaction pooler, where LISTEN does not work: the relay then polls only. */
  RELAY_LISTEN: bool.default(true),
  // OpenTelemetry (lib/tracing/config.ts): off unless an OTLP endpoint is set.
  ...tracingConfigShape,
})

export type Config = z.infer<typeof configSchema>

/** The circuit breaker's and the retry schedule's settings, as the record statement takes them. */
export function recordSettings(config: Config): RecordSettings {
  return {
    breakerFailures: config.BREAKER_FAILURES,
    breakerRate: config.BREAKER_FAILURE_RATE,
    breakerWindowMs: config.BREAKER_WINDOW_MS,
    probeMs: config.BREAKER_PROBE_MS,
    probeMaxMs: Math.max(config.BREAKER_PROBE_MS, config.BREAKER_PROBE_MAX_MS),
    retryAfterMaxMs: config.RETRY_AFTER_MAX_MS,
    jitter: config.RETRY_JITTER,
  }
}

/** Describes zod issues as `path: message` lines; never quotes the offending value. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map(issue => {
    const path = issue.path.map(String).join('.')
    const message = issue.code === 'invalid_type' && issue.message.includes('received undefined') ? 'required' : issue.message
    return path ? `${path}: ${message}` : message
  })
}

/** Validates the environment once; the error lists every problem. Values never appear in the message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return loadConfigPart(configSchema, env)
}

/** The keys every database client reads besides DATABASE_URL (the CLI and the local stack's migrator, without a full config). */
export const dbClientConfigSchema = configSchema.pick({ DB_PREPARED_STATEMENTS: true, DATABASE_CA: true })

/** The keys a relay run reads besides DATABASE_URL (the CLI's `relay run`, the local stack). */
export const relayConfigSchema = configSchema.pick({
  DB_PREPARED_STATEMENTS: true,
  DATABASE_CA: true,
  DB_STATEMENT_TIMEOUT_MS: true,
  LOG_LEVEL: true,
  RELAY_SOURCES: true,
  RELAY_BATCH_SIZE: true,
  RELAY_POLL_INTERVAL_MS: true,
  RELAY_LISTEN: true,
})

/** The keys of an SQS client's bounded waits (lib/deps.ts createSqsClient), for tools without a full config. */
export const sqsConfigSchema = configSchema.pick({
  AWS_REGION: true,
  SQS_CONNECT_TIMEOUT_MS: true,
  SQS_REQUEST_TIMEOUT_MS: true,
  SQS_MAX_ATTEMPTS: true,
})

/**
 * Validates only the keys of `part` (a `configSchema.pick(…)`), with the same rules and defaults as
 * {@link loadConfig}: for the CLI and the local stack, which need a few keys before (or without) the rest.
 */
export function loadConfigPart<S extends z.ZodType>(part: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const parsed = part.safeParse(withoutEmpty(env))
  if (!parsed.success) throw new ConfigError(describeIssues(parsed.error.issues))
  return parsed.data
}

// An exported-but-empty variable means "unset", as shells and serverless parameters produce them.
function withoutEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== '') out[k] = v
  return out
}

/** Reads one SecureString by name (in Lambda, SSM's GetParameter from functions/runtime.ts; injected so this file stays free of SDK clients). */
export type ParameterReader = (name: string) => Promise<string | undefined>

/**
 * Fills DATABASE_URL from the SSM parameter named by DATABASE_URL_SSM_PARAMETER when it is unset, so
 * the secret never sits in the deployment template. The value is kept in memory only.
 */
export async function resolveSecrets(env: NodeJS.ProcessEnv, read: ParameterReader): Promise<NodeJS.ProcessEnv> {
  const name = env.DATABASE_URL_SSM_PARAMETER
  if (env.DATABASE_URL || !name) return env
  let value: string | undefined
  try {
    value = await read(name)
  } catch (cause) {
    throw new ConfigError([`DATABASE_URL_SSM_PARAMETER: could not read ${name} (${cause instanceof Error ? cause.name : 'error'})`], {
      cause: describeCause(cause),
    })
  }
  if (!value) throw new ConfigError([`DATABASE_URL_SSM_PARAMETER: ${name} has no value`])
  return { ...env, DATABASE_URL: value }
}

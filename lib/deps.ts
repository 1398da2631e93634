import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs'
import type pg from 'pg'
import { Agent } from 'undici'
import type { Config } from './config.js'
import { createPool } from './db/pool.js'
import { guardedConnector, parseNetworks } from './delivery/egress.js'
import { createLogger, type Logger } from './log.js'
import { createMetrics, type Metrics } from './metrics/registry.js'
import { createMetricSinks, type MetricSinks } from './metrics/sinks.js'
import { createSignals, type Signals } from './signals.js'
import { createTracing, type Tracing } from './tracing/tracing.js'

/** Everything a function needs, built once per cold start (plain dependencies: no container, no factories). */
export type Deps = {
  config: Config
  db: pg.Pool
  signals: Signals
  metrics: Metrics
  log: Logger
  /** Where metrics go at the end of an invocation and after a sweep: Pushgateway, EMF (lib/metrics/sinks.ts). */
  sinks: MetricSinks
  /** Keep-alive connection pools shared by every delivery of this environment. */
  http: Agent
  /** OpenTelemetry spans (lib/tracing/tracing.ts); a no-op unless an OTLP endpoint is configured. */
  tracing: Tracing
}

/** Builds the dependencies from a validated config; `overrides` lets tests and the local stack supply their own parts. */
export function createDeps(config: Config, overrides: Partial<Omit<Deps, 'sinks'>> & { sqs?: SQSClient } = {}): Deps {
  const { sqs, ...rest } = overrides
  const client = sqs ?? createSqsClient(config)
  return {
    config,
    db: createPool(config.DATABASE_URL, config.DB_POOL_MAX, {
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
      preparedStatements: config.DB_PREPARED_STATEMENTS,
      ca: config.DATABASE_CA,
    }),
    signals: createSignals(client, config.SIGNAL_QUEUE_URL),
    log: createLogger(config.LOG_LEVEL),
    // Every connection passes the egress guard (lib/delivery/egress.ts), after DNS, pinned to the checked address.
    http: new Agent({
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 60_000,
      connections: 64,
      pipelining: 1,
      connect: guardedConnector(parseNetworks(config.WEBHOOK_ALLOWED_NETWORKS).networks),
    }),
    tracing: createTracing(config),
    ...rest,
    // After `rest`: a given registry still gets this environment's sinks around it.
    ...createMetricSinks(config, rest.metrics ?? createMetrics()),
  }
}

/**
 * The SQS client with bounded waits: connection and request timeouts (a timeout is an error, not a
 * warning) and few attempts, from config. `extra` lets tests and the local stack add an endpoint and keys.
 */
export function createSqsClient(
  config: Pick<Config, 'AWS_REGION' | 'SQS_CONNECT_TIMEOUT_MS' | 'SQS_REQUEST_TIMEOUT_MS' | 'SQS_MAX_ATTEMPTS'>,
  extra: SQSClientConfig = {},
): SQSClient {
  return new SQSClient({
    region: config.AWS_REGION,
    maxAttempts: config.SQS_MAX_ATTEMPTS,
    requestHandler: {
      connectionTimeout: config.SQS_CONNECT_TIMEOUT_MS,
      requestTimeout: config.SQS_REQUEST_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    },
    ...extra,
  })
}

/**
 * The endpoint and keys an operator's shell or the local stack gives in `env` (AWS_ENDPOINT_URL_SQS for
 * an emulator or LocalStack; keys in `env` win over the SDK's default chain), as `extra` for
 * {@link createSqsClient}. Lambda needs none of it: the SDK reads its own environment there.
 */
export function sqsEndpointFromEnv(env: NodeJS.ProcessEnv): SQSClientConfig {
  return {
    ...(env.AWS_ENDPOINT_URL_SQS ? { endpoint: env.AWS_ENDPOINT_URL_SQS } : {}),
    ...(env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
      ? { credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY } }
      : {}),
  }
}

/** Closes pools and connections (local runs and tests; Lambda just freezes). */
export async function closeDeps(deps: Deps): Promise<void> {
  await Promise.allSettled([deps.db.end(), deps.http.close(), deps.tracing.shutdown()])
}

import { SQSClient } from '@aws-sdk/client-sqs'
import type pg from 'pg'
import { Agent } from 'undici'
import type { Config } from './config.js'
import { createPool } from './db/pool.js'
import { createLogger, type Logger } from './log.js'
import { createMetrics, type Metrics } from './metrics.js'
import { createMetricSinks, type MetricSinks } from './metrics/sinks.js'
import { createSignals, type Signals } from './signals.js'

/** Everything a function needs, built once per cold start (STYLE.md #4: plain dependencies). */
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
}

/** Builds the dependencies from a validated config; `overrides` lets tests and the local stack supply their own parts. */
export function createDeps(config: Config, overrides: Partial<Omit<Deps, 'sinks'>> & { sqs?: SQSClient } = {}): Deps {
  const { sqs, ...rest } = overrides
  const client = sqs ?? new SQSClient({ region: config.AWS_REGION })
  return {
    config,
    db: createPool(config.DATABASE_URL, config.DB_POOL_MAX),
    signals: createSignals(client, config.SIGNAL_QUEUE_URL),
    log: createLogger(config.LOG_LEVEL),
    http: new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connections: 64, pipelining: 1 }),
    ...rest,
    // After `rest`: a given registry still gets this environment's sinks around it.
    ...createMetricSinks(config, rest.metrics ?? createMetrics()),
  }
}

/** Closes pools and connections (local runs and tests; Lambda just freezes). */
export async function closeDeps(deps: Deps): Promise<void> {
  await Promise.allSettled([deps.db.end(), deps.http.close()])
}

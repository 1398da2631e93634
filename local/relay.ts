// `npm start -- --contember <url>`: the relay inside the local stack, so a Contember engine's content
// mutations reach the local receivers through Actions (docs/contember-relay.md).
import { loadConfigPart, relayConfigSchema, sqsConfigSchema } from '../lib/config.js'
import { createPool } from '../lib/db/pool.js'
import { createSqsClient, sqsEndpointFromEnv } from '../lib/deps.js'
import { createLogger, type Sink } from '../lib/log.js'
import { createRelayMetrics } from '../lib/metrics/relay.js'
import { startRelay } from '../lib/relay/relay.js'
import { parseRelaySources } from '../lib/relay/sources.js'
import { createSignals } from '../lib/signals.js'
import type { LocalStack } from './stack.js'

/** A relay beside a running local stack: into its database, waking its dispatch through its queue. */
export async function startLocalRelay(
  stack: LocalStack,
  contember: readonly string[],
  env: NodeJS.ProcessEnv,
  print: (line: string) => void,
  logSink: Sink,
): Promise<{ stop(): Promise<void> }> {
  const sources = parseRelaySources(contember)
  const config = loadConfigPart(relayConfigSchema, env)
  const pool = {
    statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    preparedStatements: config.DB_PREPARED_STATEMENTS,
    ...(config.DATABASE_CA ? { ca: config.DATABASE_CA } : {}),
  }
  const actions = createPool(stack.databaseUrl, 2, pool)
  const sqs = createSqsClient(
    loadConfigPart(sqsConfigSchema, env),
    stack.sqsEndpoint
      ? { endpoint: stack.sqsEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : sqsEndpointFromEnv(env),
  )
  try {
    const relay = await startRelay(
      { actions, log: createLogger(config.LOG_LEVEL, logSink), metrics: createRelayMetrics(), signals: createSignals(sqs, stack.queueUrl) },
      sources,
      { batchSize: config.RELAY_BATCH_SIZE, pollIntervalMs: config.RELAY_POLL_INTERVAL_MS, listen: config.RELAY_LISTEN, poolMax: 2, pool },
    )
    print(`relay      from the Contember outbox of ${sources.map(s => s.project).join(', ')} into Actions`)
    return {
      stop: async () => {
        await relay.stop()
        sqs.destroy()
        await actions.end()
      },
    }
  } catch (e) {
    sqs.destroy()
    await actions.end()
    throw e
  }
}

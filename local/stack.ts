import { createHandler as createDispatch } from '../functions/dispatch.js'
import { createHandler as createEnqueue } from '../functions/enqueue.js'
import { createHandler as createSweeper } from '../functions/sweeper.js'
import { adminRoutes } from '../lib/admin/api.js'
import type { Route } from '../lib/admin/types.js'
import { loadConfig, type Config } from '../lib/config.js'
import { closeDeps, createDeps, type Deps } from '../lib/deps.js'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { createLogger, type Sink } from '../lib/log.js'
import { createSweeperGauges } from '../lib/metrics/registry.js'
import { tracesUrl } from '../lib/tracing/config.js'
import { lambdaContext } from './lambda.js'
import { bootstrapToken } from './stack/admin-token.js'
import { migrateDatabase, startDatabase } from './stack/database.js'
import { startDispatchPoller } from './stack/dispatch-poller.js'
import { REQUEST_TIMEOUT_MS, serveHttp } from './stack/http.js'
import { startQueues } from './stack/queues.js'
import { localRoutes } from './stack/routes.js'
import { runCleanups, type Cleanups } from './stack/shutdown.js'
import { startSweepTimer } from './stack/sweep-timer.js'

export { REQUEST_TIMEOUT_MS }

export type LocalStackOptions = {
  /** Environment the functions would get (DATABASE_URL, SIGNAL_QUEUE_URL, AWS_ENDPOINT_URL_SQS, PUSHGATEWAY_URL, tuning). */
  env?: NodeJS.ProcessEnv
  /** Keeps the embedded Postgres cluster here across restarts. */
  dataDir?: string
  /** Port of the HTTP endpoint (0: any free port). */
  port?: number
  /** How often the sweeper runs (Lambda: every minute). */
  sweepIntervalMs?: number
  /** The dispatch function's timeout (Lambda: 120 s); also the visibility timeout of received signals. */
  dispatchTimeoutMs?: number
  /** Prints a line (where things listen, one per delivered batch). */
  print?: (line: string) => void
  onBatch?: DrainOptions['onBatch']
  /** Where the functions' log lines go (default: stdout, as in Lambda). */
  logSink?: Sink
  /**
   * How long a request may take to arrive, headers and body (default {@link REQUEST_TIMEOUT_MS}): a
   * client that stops sending mid-request gets a 408 and its connection closed, instead of holding it.
   */
  requestTimeoutMs?: number
  /** The admin API's routes under /v1/ and /actions/ (default: lib/admin/api.ts's adminRoutes()). */
  adminRoutes?: readonly Route[]
}

export type LocalStack = {
  /** Base URL of the HTTP endpoint: POST /enqueue, PUT /schema/:project, GET /events/:project, GET /metrics. */
  url: string
  databaseUrl: string
  queueUrl: string
  /** The SQS endpoint when the stack runs its own emulator. */
  sqsEndpoint?: string
  /** The embedded Postgres' postmaster process id, when the stack runs its own. */
  postgresPid?: number
  /**
   * The admin API's bootstrap token: a Bearer token that acts as system (every project), as an IAM
   * caller does when deployed. `ACTIONS_ADMIN_TOKEN` in `env` when set, else random per start.
   */
  adminToken: string
  /** Runs one sweeper pass now (the timer runs them too). */
  sweep(): Promise<unknown>
  /**
   * Stops like a service: no new requests or claims; in-flight deliveries finish or time out (their
   * target's timeoutMs) and their outcomes are recorded; unstarted claims are released; then the
   * queue and, last, Postgres stop. Calling it again returns the same promise.
   */
  stop(): Promise<void>
}

/**
 * The functions on this machine, driven as Lambda drives them: an HTTP endpoint invokes enqueue and
 * serves the admin API and the console, an SQS poller invokes dispatch with real SQSEvent batches, a
 * timer invokes the sweeper. Postgres and SQS come from the environment when configured, else
 * embedded ones start. Each part is started by a function of its own in local/stack/.
 */
export async function startLocalStack(opts: LocalStackOptions = {}): Promise<LocalStack> {
  const env = { ...opts.env }
  const print = opts.print ?? (() => {})
  const cleanups: Cleanups = []
  // Set when stopping: running dispatch invocations see no time left, so they claim nothing more.
  let stopping = false
  try {
    const postgres = await startDatabase(env, opts.dataDir, cleanups, print)
    await migrateDatabase(postgres.url, env, print)
    const queues = await startQueues(env, cleanups, print)
    const config = localConfig(env, print)
    const deps = createDeps(config, { sqs: queues.sqs, ...(opts.logSink ? { log: createLogger(config.LOG_LEVEL, opts.logSink) } : {}) })
    cleanups.push(() => closeDeps(deps))
    // Without a Pushgateway, /metrics serves this process's counters and the last sweep's gauges.
    let lastGauges = createSweeperGauges().registry
    const sweeper = createSweeper(() => deps, { onSweep: result => void (lastGauges = result.gauges.registry) })
    const sweep = () => sweeper({}, lambdaContext('sweeper', 55_000))
    const adminToken = bootstrapToken(env)
    const handle = localRoutes({
      deps,
      enqueue: createEnqueue(() => deps),
      lastGauges: () => lastGauges,
      adminRoutes: opts.adminRoutes ?? adminRoutes(),
      adminToken,
    })
    const { url, server } = await serveHttp(opts.port ?? 3000, opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS, deps.log, handle, cleanups)
    printEndpoints(url, env, adminToken, config, print)
    startDispatch(deps, queues, opts, () => stopping, cleanups, print)
    const sweepIntervalMs = opts.sweepIntervalMs ?? 60_000
    startSweepTimer(sweep, sweepIntervalMs, deps.log, cleanups)
    print(`sweeper    every ${Math.round(sweepIntervalMs / 1000)} s`)
    let stopped: Promise<void> | undefined
    const stop = () =>
      (stopped ??= (async () => {
        stopping = true
        // No new enqueues while the rest winds down.
        server.close()
        await runCleanups(cleanups)
      })())
    return {
      url,
      databaseUrl: config.DATABASE_URL,
      queueUrl: config.SIGNAL_QUEUE_URL,
      adminToken,
      ...(queues.sqsEndpoint ? { sqsEndpoint: queues.sqsEndpoint } : {}),
      ...(postgres.pid ? { postgresPid: postgres.pid } : {}),
      sweep,
      stop,
    }
  } catch (e) {
    await runCleanups(cleanups)
    throw e
  }
}

/** The functions' configuration over the local environment: loopback receivers allowed unless said otherwise. */
function localConfig(env: NodeJS.ProcessEnv, print: (line: string) => void): Config {
  // Receivers on this machine (the demo's, a developer's) listen on loopback, which the egress guard
  // refuses in deployed stages: the local stack allows it unless WEBHOOK_ALLOWED_NETWORKS says otherwise.
  env.WEBHOOK_ALLOWED_NETWORKS ??= '127.0.0.0/8,::1/128'
  print(`egress     private addresses refused; allowed: ${env.WEBHOOK_ALLOWED_NETWORKS || 'none'} (WEBHOOK_ALLOWED_NETWORKS)`)
  const config = loadConfig(env)
  const traces = tracesUrl(config)
  // The endpoint's origin only: a collector URL may carry credentials in its path or query.
  if (traces)
    print(
      `traces     OTLP/HTTP to ${new URL(traces).origin} (sampler ${config.OTEL_TRACES_SAMPLER}, to webhooks: ${config.TRACES_TO_WEBHOOKS})`,
    )
  return config
}

/** The banner's lines for the HTTP endpoint: enqueue, the admin API with its bootstrap token, the console, metrics. */
function printEndpoints(url: string, env: NodeJS.ProcessEnv, adminToken: string, config: Config, print: (line: string) => void): void {
  print(`enqueue    POST ${url}/enqueue   (schema: PUT ${url}/schema/<project>, states: GET ${url}/events/<project>)`)
  // Printed unless the caller chose it: a token given in the environment is named, never shown.
  print(
    `admin      ${url}/v1/… and POST ${url}/actions/<project>, bootstrap token (system): ${env.ACTIONS_ADMIN_TOKEN ? 'ACTIONS_ADMIN_TOKEN' : adminToken}`,
  )
  print(`console    ${url}/console   (log in with the bootstrap token or a project token)`)
  print(config.PUSHGATEWAY_URL ? 'metrics    pushed to PUSHGATEWAY_URL' : `metrics    GET ${url}/metrics`)
}

/** The dispatch function behind the signal queue's poller. */
function startDispatch(
  deps: Deps,
  queues: Awaited<ReturnType<typeof startQueues>>,
  opts: LocalStackOptions,
  stopping: () => boolean,
  cleanups: Cleanups,
  print: (line: string) => void,
): void {
  const invoke = createDispatch(() => deps, opts.onBatch ? { onBatch: opts.onBatch } : {})
  const timeoutMs = opts.dispatchTimeoutMs ?? 120_000
  startDispatchPoller(deps, { sqs: queues.sqs, queueArn: queues.queueArn, invoke, timeoutMs, stopping }, cleanups)
  print(`dispatch   polling the signal queue, ${deps.config.DISPATCH_MAX_CONCURRENCY} invocations at most at once`)
}

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Context } from 'aws-lambda'
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs'
import { Registry } from 'prom-client'
import { randomBytes } from 'node:crypto'
import { createHandler as createDispatch } from '../functions/dispatch.js'
import { createHandler as createEnqueue } from '../functions/enqueue.js'
import { createHandler as createSweeper } from '../functions/sweeper.js'
import { dbClientConfigSchema, loadConfig, loadConfigPart, sqsConfigSchema } from '../lib/config.js'
import { migrate } from '../lib/db/migrate.js'
import { createPool } from '../lib/db/pool.js'
import { storeSchema } from '../lib/db/schemas.js'
import { closeDeps, createDeps, createSqsClient, sqsEndpointFromEnv } from '../lib/deps.js'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { EnqueueValidationError } from '../lib/enqueue/errors.js'
import { SchemaValidationError } from '../lib/schema/actions.js'
import { createSweeperGauges } from '../lib/metrics/registry.js'
import { createLogger, type Logger, type Sink } from '../lib/log.js'
import { adminRoutes } from '../lib/admin/api.js'
import { bearerToken } from '../lib/admin/auth.js'
import { createRouter } from '../lib/admin/router.js'
import type { Route } from '../lib/admin/types.js'
import { isAdminPath, serveAdmin, serveConsole } from './admin-http.js'
import { isConsolePath } from '../console/serve.js'
import { lambdaContext } from './lambda.js'
import { startPoller } from './poller.js'
import { startEmbeddedPostgres } from './postgres.js'
import { tracesUrl } from '../lib/tracing/config.js'

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

/** Slack beyond the longest target timeout for in-flight drains to record and release before we stop waiting. */
const SHUTDOWN_SLACK_MS = 15_000
/** How long open HTTP requests (an enqueue writing its rows) may take to finish at shutdown. */
const HTTP_DRAIN_MS = 5_000

/**
 * The three functions on this machine, driven as Lambda drives them: an HTTP endpoint invokes
 * enqueue, an SQS poller invokes dispatch with real SQSEvent batches, a timer invokes the sweeper.
 * Postgres and SQS come from the environment when configured, else embedded ones start.
 */
export async function startLocalStack(opts: LocalStackOptions = {}): Promise<LocalStack> {
  const env = { ...opts.env }
  const print = opts.print ?? (() => {})
  const cleanups: Array<() => Promise<void>> = []
  const stopAll = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {})
  }
  // Set when stopping: running dispatch invocations see no time left, so they claim nothing more.
  let stopping = false
  let postgresPid: number | undefined
  let sqsEndpoint: string | undefined
  try {
    if (!env.DATABASE_URL) {
      const pg = await startEmbeddedPostgres({ ...(opts.dataDir === undefined ? {} : { dataDir: opts.dataDir }) })
      cleanups.push(pg.stop)
      postgresPid = pg.pid
      env.DATABASE_URL = pg.url
      print(
        `postgres   embedded at 127.0.0.1:${pg.port}${opts.dataDir ? ` (data in ${pg.dataDir})` : ' (temporary: pass --data-dir to keep it)'}`,
      )
    } else {
      print('postgres   DATABASE_URL')
    }
    const db = loadConfigPart(dbClientConfigSchema, env)
    const migrator = createPool(env.DATABASE_URL, 1, { preparedStatements: db.DB_PREPARED_STATEMENTS, ca: db.DATABASE_CA })
    try {
      const applied = await migrate(migrator)
      if (applied.length) print(`migrations applied: ${applied.join(', ')}`)
    } finally {
      await migrator.end()
    }

    // The functions' bounded waits (SQS_* keys), known before the rest: the queue URL comes from the emulator.
    const sqsConfig = loadConfigPart(sqsConfigSchema, env)
    let sqs: SQSClient
    if (!env.SIGNAL_QUEUE_URL) {
      // fauxqs' startFauxqs listens on every interface; its app listens where we say.
      const { buildApp } = await import('fauxqs')
      const app = buildApp({ logger: false })
      await app.listen({ port: 0, host: '127.0.0.1' })
      cleanups.push(() => app.close())
      const endpoint = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
      sqsEndpoint = endpoint
      sqs = createSqsClient(sqsConfig, { endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })
      const dlq = await sqs.send(new CreateQueueCommand({ QueueName: 'actions-signals-dlq' }))
      const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes
        ?.QueueArn
      const q = await sqs.send(
        new CreateQueueCommand({
          QueueName: 'actions-signals',
          Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 5 }) },
        }),
      )
      env.SIGNAL_QUEUE_URL = q.QueueUrl
      print(`sqs        in-process emulator at ${endpoint} (queue actions-signals, DLQ after 5 receives)`)
    } else {
      // AWS_ENDPOINT_URL_SQS (LocalStack, an emulator) and keys given in `env` win over the process's.
      sqs = createSqsClient(sqsConfig, sqsEndpointFromEnv(env))
      print('sqs        SIGNAL_QUEUE_URL')
    }
    cleanups.push(async () => sqs.destroy())
    const queueArn =
      (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: env.SIGNAL_QUEUE_URL, AttributeNames: ['QueueArn'] }))).Attributes
        ?.QueueArn ?? 'arn:aws:sqs:local:000000000000:actions-signals'

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
    const deps = createDeps(config, { sqs, ...(opts.logSink ? { log: createLogger(config.LOG_LEVEL, opts.logSink) } : {}) })
    cleanups.push(() => closeDeps(deps))
    const enqueue = createEnqueue(() => deps)
    const dispatch = createDispatch(() => deps, opts.onBatch ? { onBatch: opts.onBatch } : {})
    // Without a Pushgateway, /metrics serves this process's counters and the last sweep's gauges.
    let lastGauges = createSweeperGauges().registry
    const sweeper = createSweeper(() => deps, {
      onSweep: result => {
        lastGauges = result.gauges.registry
      },
    })
    const sweep = () => sweeper({}, lambdaContext('sweeper', 55_000))
    const adminToken = bootstrapToken(env)
    const admin = createRouter(opts.adminRoutes ?? adminRoutes())
    const server = await listen(opts.port ?? 3000, opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS, deps.log, async (req, res) => {
      const path = new URL(req.url ?? '/', 'http://local').pathname
      if (isAdminPath(path)) return serveAdmin(admin, deps, { systemToken: adminToken }, req, res)
      if (isConsolePath(path)) return serveConsole(req, res)
      if (req.method === 'POST' && path === '/enqueue')
        return reply(res, 200, await enqueue(withTraceHeaders(await readJson(req), req), lambdaContext('enqueue', 30_000)))
      const schemaPath = /^\/schema\/([^/]+)$/.exec(path)
      if (req.method === 'PUT' && schemaPath?.[1])
        return reply(res, 200, {
          version: await storeSchema(deps.db, decodeURIComponent(schemaPath[1]), await readJson(req), {
            maxTimeoutMs: config.MAX_TARGET_TIMEOUT_MS,
          }),
        })
      const eventsPath = /^\/events\/([^/]+)$/.exec(path)
      if (req.method === 'GET' && eventsPath?.[1]) {
        const { rows } = await deps.db.query<{ state: string; n: number }>(
          'SELECT state, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY state',
          [decodeURIComponent(eventsPath[1])],
        )
        return reply(res, 200, Object.fromEntries(rows.map(r => [r.state, r.n])))
      }
      if (req.method === 'GET' && path === '/metrics') {
        const merged = Registry.merge([deps.metrics.registry, lastGauges])
        res.writeHead(200, { 'content-type': merged.contentType })
        return void res.end(await merged.metrics())
      }
      if (req.method === 'GET' && path === '/healthz') return reply(res, 200, { ok: true })
      throw new RequestError(404, 'no such route')
    })
    const closed = new Promise<void>(r => server.once('close', () => r()))
    cleanups.push(async () => {
      // Requests still open (an enqueue writing its rows) get a moment; then their connections go.
      server.close()
      server.closeIdleConnections()
      if (!(await within(HTTP_DRAIN_MS, closed))) server.closeAllConnections()
      await closed
    })
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    print(`enqueue    POST ${url}/enqueue   (schema: PUT ${url}/schema/<project>, states: GET ${url}/events/<project>)`)
    // Printed, as the issue asks, unless the caller chose it: a token given in the environment is named, never shown.
    print(
      `admin      ${url}/v1/… and POST ${url}/actions/<project>, bootstrap token (system): ${env.ACTIONS_ADMIN_TOKEN ? 'ACTIONS_ADMIN_TOKEN' : adminToken}`,
    )
    print(`console    ${url}/console   (log in with the bootstrap token or a project token)`)
    print(config.PUSHGATEWAY_URL ? 'metrics    pushed to PUSHGATEWAY_URL' : `metrics    GET ${url}/metrics`)

    const dispatchTimeoutMs = opts.dispatchTimeoutMs ?? 120_000
    const poller = startPoller({
      sqs,
      queueUrl: config.SIGNAL_QUEUE_URL,
      queueArn,
      batchSize: 10,
      concurrency: config.DISPATCH_MAX_CONCURRENCY,
      timeoutMs: dispatchTimeoutMs,
      invoke: dispatch,
      context: () => cutShortWhen(() => stopping, lambdaContext('dispatch', dispatchTimeoutMs)),
      log: deps.log,
    })
    cleanups.push(async () => {
      // The drains under way stop claiming, release what they had not started, and record what they
      // delivered; the slowest in-flight delivery ends by its target's timeout.
      if (!(await within(config.MAX_TARGET_TIMEOUT_MS + SHUTDOWN_SLACK_MS, poller.stop()))) {
        deps.log.error('Dispatch did not finish in time at shutdown; its claims return when their leases end')
      }
    })
    print(`dispatch   polling the signal queue, ${config.DISPATCH_MAX_CONCURRENCY} invocations at most at once`)

    const sweepIntervalMs = opts.sweepIntervalMs ?? 60_000
    let sweeping: Promise<unknown> | undefined
    const tick = () => {
      sweeping ??= sweep()
        .catch(error => deps.log.error('Sweeper invocation failed', { error }))
        .finally(() => {
          sweeping = undefined
        })
    }
    const timer = setInterval(tick, sweepIntervalMs)
    // A first pass right away re-drives whatever a restart left due (signals do not survive one).
    tick()
    cleanups.push(async () => {
      clearInterval(timer)
      await sweeping
    })
    print(`sweeper    every ${Math.round(sweepIntervalMs / 1000)} s`)

    let stopped: Promise<void> | undefined
    const stop = () =>
      (stopped ??= (async () => {
        stopping = true
        // No new enqueues while the rest winds down.
        server.close()
        await stopAll()
      })())
    return {
      url,
      databaseUrl: config.DATABASE_URL,
      queueUrl: config.SIGNAL_QUEUE_URL,
      adminToken,
      ...(sqsEndpoint ? { sqsEndpoint } : {}),
      ...(postgresPid ? { postgresPid } : {}),
      sweep,
      stop,
    }
  } catch (e) {
    await stopAll()
    throw e
  }
}

/** Random bytes of a bootstrap token: as many as a project token's (lib/db/tokens.ts). */
const BOOTSTRAP_TOKEN_BYTES = 32

/** ACTIONS_ADMIN_TOKEN when set (it must be usable as a Bearer token), else a fresh random token for this start. */
function bootstrapToken(env: NodeJS.ProcessEnv): string {
  const given = env.ACTIONS_ADMIN_TOKEN
  if (given === undefined || given === '') return `actions_local_${randomBytes(BOOTSTRAP_TOKEN_BYTES).toString('base64url')}`
  // Checked by the parser the router uses, so a token that could never be sent is refused at start.
  if (given.length < 16 || bearerToken(`Bearer ${given}`) !== given)
    throw new Error('ACTIONS_ADMIN_TOKEN must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / (a Bearer token)')
  return given
}

/** A request the stack refuses, with the status and a reason that quotes nothing from the body. */
class RequestError extends Error {
  override name = 'RequestError'
  constructor(
    readonly status: number,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** Largest request body, as Lambda's synchronous invoke payload limit. */
const MAX_BODY_BYTES = 6 * 1024 * 1024
/** Time a request may take to arrive by default (Node's own default is 5 minutes). */
export const REQUEST_TIMEOUT_MS = 30_000

function listen(
  port: number,
  requestTimeoutMs: number,
  log: Logger,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<Server> {
  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough that a
  // stalled request is cut within a quarter of its timeout past it.
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(requestTimeoutMs / 4))),
    },
    (req, res) => {
      handle(req, res).catch((error: unknown) => {
        const route = `${req.method ?? ''} ${routeOf(req.url)}`
        const refused = refusal(error)
        if (refused) {
          // The reason names fields and limits; the body is never quoted.
          log.warn('Refused a local request', { route, status: refused.status, reason: refused.reason, fields: refused.fields })
          return reply(res, refused.status, { error: refused.reason, ...(refused.problems ? { problems: refused.problems } : {}) })
        }
        log.error('Local request failed', { route, error })
        reply(res, 500, { error: error instanceof Error ? error.name : 'Error' })
      })
    },
  )
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

/** What to answer for an error caused by the request itself; undefined for our own faults (500). */
function refusal(error: unknown): { status: number; reason: string; problems?: string[]; fields?: string[] } | undefined {
  if (error instanceof EnqueueValidationError || error instanceof SchemaValidationError) {
    // A problem reads `path: message`; the log gets the paths only, the producer gets the messages.
    return {
      status: 400,
      reason: error.name,
      problems: error.problems,
      fields: error.problems.slice(0, 20).map(p => p.split(':')[0] ?? ''),
    }
  }
  if (error instanceof RequestError) return { status: error.status, reason: error.message }
  // A malformed percent-escape in the project part of the path.
  if (error instanceof URIError) return { status: 400, reason: 'malformed path' }
  // Postgres' data exceptions (class 22: NUL bytes, invalid text, out-of-range values) come from input.
  if (error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('22')) {
    return { status: 400, reason: `input the database refuses (SQLSTATE ${error.code})` }
  }
  return undefined
}

/** The route of a request for the log: the project part of a path is kept short. */
function routeOf(url: string | undefined): string {
  const path = (url ?? '/').split('?')[0] ?? '/'
  return path.length > 80 ? `${path.slice(0, 80)}…` : path
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return
  if (res.headersSent) return void res.end()
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** Waits for `work` at most `ms`; true when it settled in time. */
async function within(ms: number, work: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const done = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>(resolve => {
      timer = setTimeout(() => resolve(false), ms)
    }),
  ])
  clearTimeout(timer)
  return done
}

/** A context whose remaining time drops to zero once `stop()` holds, as a Lambda near its timeout. */
function cutShortWhen(stop: () => boolean, context: Context): Context {
  const remaining = context.getRemainingTimeInMillis
  return { ...context, getRemainingTimeInMillis: () => (stop() ? 0 : remaining()) }
}

/**
 * A content API invokes the enqueue Lambda with its trace context in the payload; over this HTTP
 * endpoint a client sends the W3C headers instead, so they become those fields (a body's own win).
 */
function withTraceHeaders(body: unknown, req: IncomingMessage): unknown {
  const { traceparent, tracestate } = req.headers
  if (typeof traceparent !== 'string' || typeof body !== 'object' || body === null || Array.isArray(body) || 'traceparent' in body)
    return body
  return { ...body, traceparent, ...(typeof tracestate === 'string' ? { tracestate } : {}) }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let size = 0
  const chunks: Buffer[] = []
  try {
    for await (const c of req) {
      const buf = Buffer.from(c)
      size += buf.length
      if (size > MAX_BODY_BYTES) throw new RequestError(413, 'request body over 6 MB (the Lambda invoke limit)')
      chunks.push(buf)
    }
  } catch (e) {
    // The server cut it at its time limit (and answered 408 itself), or the client went away.
    if (req.destroyed && !(e instanceof RequestError))
      throw new RequestError(408, 'request stopped arriving (time limit, or the client went away)')
    throw e
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch (cause) {
    // The parser's message quotes the body, and a schema holds target URLs: only its name is kept.
    throw new RequestError(400, 'request body is not valid JSON', {
      cause: new SyntaxError(cause instanceof Error ? cause.name : 'unparsable'),
    })
  }
}

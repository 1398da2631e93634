import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs'
import { Registry } from 'prom-client'
import { createHandler as createDispatch } from '../functions/dispatch.js'
import { createHandler as createEnqueue } from '../functions/enqueue.js'
import { createHandler as createSweeper } from '../functions/sweeper.js'
import { loadConfig } from '../lib/config.js'
import { migrate } from '../lib/db/migrate.js'
import { createPool } from '../lib/db/pool.js'
import { storeSchema } from '../lib/db/schemas.js'
import { closeDeps, createDeps } from '../lib/deps.js'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { EnqueueValidationError } from '../lib/enqueue.js'
import { SchemaValidationError } from '../lib/schema/actions.js'
import { createSweeperGauges } from '../lib/metrics.js'
import { createLogger, type Sink } from '../lib/log.js'
import { lambdaContext } from './lambda.js'
import { startPoller } from './poller.js'
import { startEmbeddedPostgres } from './postgres.js'

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
}

export type LocalStack = {
  /** Base URL of the HTTP endpoint: POST /enqueue, PUT /schema/:project, GET /events/:project, GET /metrics. */
  url: string
  databaseUrl: string
  queueUrl: string
  /** Runs one sweeper pass now (the timer runs them too). */
  sweep(): Promise<unknown>
  stop(): Promise<void>
}

/**
 * The three functions on this machine, driven as Lambda drives them: an HTTP endpoint invokes
 * enqueue, an SQS poller invokes dispatch with real SQSEvent batches, a timer invokes the sweeper.
 * Postgres and SQS come from the environment when configured, else embedded ones start.
 */
export async function startLocalStack(opts: LocalStackOptions = {}): Promise<LocalStack> {
  const env = { ...opts.env }
  const print = opts.print ?? (() => {})
  const cleanups: Array<() => Promise<void>> = []
  const stopAll = async () => { for (const c of cleanups.reverse()) await c().catch(() => {}) }
  try {
    if (!env.DATABASE_URL) {
      const pg = await startEmbeddedPostgres({ ownSignals: true, ...(opts.dataDir === undefined ? {} : { dataDir: opts.dataDir }) })
      cleanups.push(pg.stop)
      env.DATABASE_URL = pg.url
      print(`postgres   embedded at 127.0.0.1:${pg.port}${opts.dataDir ? ` (data in ${pg.dataDir})` : ' (temporary: pass --data-dir to keep it)'}`)
    } else {
      print('postgres   DATABASE_URL')
    }
    const migrator = createPool(env.DATABASE_URL, 1)
    try {
      const applied = await migrate(migrator)
      if (applied.length) print(`migrations applied: ${applied.join(', ')}`)
    } finally {
      await migrator.end()
    }

    let sqs: SQSClient
    if (!env.SIGNAL_QUEUE_URL) {
      const { startFauxqs } = await import('fauxqs')
      const server = await startFauxqs({ port: 0, logger: false })
      cleanups.push(() => server.stop())
      const endpoint = `http://127.0.0.1:${server.port}`
      sqs = new SQSClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })
      const dlq = await sqs.send(new CreateQueueCommand({ QueueName: 'actions-signals-dlq' }))
      const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn
      const q = await sqs.send(new CreateQueueCommand({ QueueName: 'actions-signals', Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 5 }) } }))
      env.SIGNAL_QUEUE_URL = q.QueueUrl
      print(`sqs        in-process emulator at ${endpoint} (queue actions-signals, DLQ after 5 receives)`)
    } else {
      // The SDK honours AWS_ENDPOINT_URL_SQS (LocalStack, an emulator) like the deployed functions do.
      sqs = new SQSClient({
        region: env.AWS_REGION ?? 'us-east-1',
        ...(env.AWS_ENDPOINT_URL_SQS ? { endpoint: env.AWS_ENDPOINT_URL_SQS } : {}),
        // Keys given in `env` win over the process's; otherwise the SDK's default chain applies.
        ...(env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY ? { credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY } } : {}),
      })
      print('sqs        SIGNAL_QUEUE_URL')
    }
    cleanups.push(async () => sqs.destroy())
    const queueArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: env.SIGNAL_QUEUE_URL, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn ?? 'arn:aws:sqs:local:000000000000:actions-signals'

    const config = loadConfig(env)
    const deps = createDeps(config, { sqs, ...(opts.logSink ? { log: createLogger(config.LOG_LEVEL, opts.logSink) } : {}) })
    cleanups.push(() => closeDeps(deps))
    const enqueue = createEnqueue(() => deps)
    const dispatch = createDispatch(() => deps, opts.onBatch ? { onBatch: opts.onBatch } : {})
    // Without a Pushgateway, /metrics serves this process's counters and the last sweep's gauges.
    let lastGauges = createSweeperGauges().registry
    const sweeper = createSweeper(() => deps, { onSweep: result => { lastGauges = result.gauges.registry } })
    const sweep = () => sweeper({}, lambdaContext('sweeper', 55_000))
    const server = await listen(opts.port ?? 3000, async (req, res) => {
      const path = new URL(req.url ?? '/', 'http://local').pathname
      if (req.method === 'POST' && path === '/enqueue') return reply(res, 200, await enqueue(await readJson(req), lambdaContext('enqueue', 30_000)))
      const schemaPath = /^\/schema\/([^/]+)$/.exec(path)
      if (req.method === 'PUT' && schemaPath?.[1]) return reply(res, 200, { version: await storeSchema(deps.db, decodeURIComponent(schemaPath[1]), await readJson(req)) })
      const eventsPath = /^\/events\/([^/]+)$/.exec(path)
      if (req.method === 'GET' && eventsPath?.[1]) {
        const { rows } = await deps.db.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY state', [decodeURIComponent(eventsPath[1])])
        return reply(res, 200, Object.fromEntries(rows.map(r => [r.state, r.n])))
      }
      if (req.method === 'GET' && path === '/metrics') {
        const merged = Registry.merge([deps.metrics.registry, lastGauges])
        res.writeHead(200, { 'content-type': merged.contentType })
        return void res.end(await merged.metrics())
      }
      if (req.method === 'GET' && path === '/healthz') return reply(res, 200, { ok: true })
      reply(res, 404, { error: 'not found' })
    })
    cleanups.push(() => new Promise<void>(r => { server.closeAllConnections(); server.close(() => r()) }))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    print(`enqueue    POST ${url}/enqueue   (schema: PUT ${url}/schema/<project>, states: GET ${url}/events/<project>)`)
    print(config.PUSHGATEWAY_URL ? 'metrics    pushed to PUSHGATEWAY_URL' : `metrics    GET ${url}/metrics`)

    const dispatchTimeoutMs = opts.dispatchTimeoutMs ?? 120_000
    const poller = startPoller({
      sqs, queueUrl: config.SIGNAL_QUEUE_URL, queueArn,
      batchSize: 10, concurrency: config.DISPATCH_MAX_CONCURRENCY, timeoutMs: dispatchTimeoutMs,
      invoke: dispatch, context: () => lambdaContext('dispatch', dispatchTimeoutMs), log: deps.log,
    })
    cleanups.push(() => poller.stop())
    print(`dispatch   polling the signal queue, ${config.DISPATCH_MAX_CONCURRENCY} invocations at most at once`)

    const sweepIntervalMs = opts.sweepIntervalMs ?? 60_000
    let sweeping: Promise<unknown> | undefined
    const tick = () => {
      sweeping ??= sweep().catch(error => deps.log.error('Sweeper invocation failed', { error })).finally(() => { sweeping = undefined })
    }
    const timer = setInterval(tick, sweepIntervalMs)
    // A first pass right away re-drives whatever a restart left due (signals do not survive one).
    tick()
    cleanups.push(async () => { clearInterval(timer); await sweeping })
    print(`sweeper    every ${Math.round(sweepIntervalMs / 1000)} s`)

    return { url, databaseUrl: config.DATABASE_URL, queueUrl: config.SIGNAL_QUEUE_URL, sweep, stop: stopAll }
  } catch (e) {
    await stopAll()
    throw e
  }
}

function listen(port: number, handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<Server> {
  const server = createServer((req, res) => {
    handle(req, res).catch(error => {
      if (error instanceof EnqueueValidationError || error instanceof SchemaValidationError || error instanceof SyntaxError) {
        reply(res, 400, { error: error.name, problems: 'problems' in error ? error.problems : [error.message] })
      } else {
        reply(res, 500, { error: error instanceof Error ? error.name : 'Error' })
      }
    })
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let size = 0
  const chunks: Buffer[] = []
  for await (const c of req) {
    const buf = Buffer.from(c)
    size += buf.length
    if (size > 6 * 1024 * 1024) throw new SyntaxError('request body over 6 MB (the Lambda invoke limit)')
    chunks.push(buf)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    // The parser's message quotes the body, and a schema holds target URLs.
    throw new SyntaxError('request body is not valid JSON')
  }
}

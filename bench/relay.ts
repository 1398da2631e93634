// npm run bench:relay: content mutations through a real Contember engine (@contember/engine-server
// 2.0.8) to webhook deliveries, two ways in one run on the same machine and the same backlog shape:
// through the relay and Actions (the local stack), and through the engine's own dispatcher. For each
// target batchSize (1 and 50): events/s over a backlog written while nothing delivered, then the
// mutation-to-webhook latency (p50, p99) of a paced stream. Ratios within this run are what to read.
import pg from 'pg'
import { createSqsClient } from '../lib/deps.js'
import { createLogger } from '../lib/log.js'
import { createRelayMetrics } from '../lib/metrics/relay.js'
import { DEFAULT_RELAY_OPTIONS, startRelay, type Relay } from '../lib/relay/relay.js'
import { createSignals } from '../lib/signals.js'
import { startEmbeddedPostgres, withDatabase } from '../local/postgres.js'
import { startLocalStack, type LocalStack } from '../local/stack.js'
import { startEngine, type Engine, type EngineProject } from '../test/helpers/contember.js'
import { startReceiver, type Receiver } from '../test/helpers/receiver.js'
import { until } from '../test/helpers/wait.js'
import { dec, int, percentile, table } from './stats.js'

/** Articles in the backlog; each fires two rows (the basic and the watch trigger), written 50 to a transaction. */
const BACKLOG_ARTICLES = Number(process.env.BENCH_RELAY_ARTICLES ?? 200)
const PER_TRANSACTION = 50
/** Paced mutations for the latency rows, one article each, this many ms apart. */
const PACED = 40
const PACE_MS = 50
/** Longest wait for a delivery phase: the bench stops with an error instead of hanging. */
const PHASE_TIMEOUT_MS = 180_000
/** Longest wait for the paced stream's deliveries after its last mutation. */
const PACED_TIMEOUT_MS = 30_000

type Row = { way: string; batchSize: number; eventsPerSecond: number; p50: number; p99: number; pacedDelivered: number }

async function writeBacklog(project: EngineProject): Promise<number> {
  for (let t = 0; t < BACKLOG_ARTICLES / PER_TRANSACTION; t++) {
    const creates = Array.from({ length: PER_TRANSACTION }, (_, i) => `a${i}: createArticle(data: { title: "b${t}-${i}" }) { ok }`).join(
      ' ',
    )
    await project.content(`mutation { transaction { ok ${creates} } }`)
  }
  return BACKLOG_ARTICLES * 2
}

/**
 * Events/s from the first arrival to the last of `n`: the steady rate, without either way's start-up
 * (the engine's takes seconds to print that it runs, and its dispatcher may already be sending then).
 */
async function drained(receiver: Receiver, n: number): Promise<number> {
  await until(`${n} deliveries`, () => receiver.eventIds().length >= n, PHASE_TIMEOUT_MS)
  const times = receiver.requests.map(r => r.at)
  const first = Math.min(...times)
  const last = Math.max(...times)
  const afterFirst = n - (receiver.requests[0]?.body?.events?.length ?? 1)
  return last > first ? (afterFirst / (last - first)) * 1000 : NaN
}

/** Paced single-article mutations; each event's latency from its mutation's start to its arrival. */
async function paced(project: EngineProject, receiver: Receiver): Promise<number[]> {
  const before = receiver.eventIds().length
  const started = new Map<string, number>()
  for (let i = 0; i < PACED; i++) {
    const at = Date.now()
    const r = await project.content<{ createArticle: { node: { id: string } } }>(
      `mutation { createArticle(data: { title: "p${i}" }) { node { id } } }`,
    )
    started.set(r.createArticle.node.id, at)
    await new Promise(resolve => setTimeout(resolve, PACE_MS))
  }
  // Bounded and without throwing: what did not arrive in time shows as a count below PACED * 2.
  await until('the paced deliveries', () => receiver.eventIds().length >= before + PACED * 2, PACED_TIMEOUT_MS).catch(() => {})
  const latencies: number[] = []
  for (const req of receiver.requests)
    for (const e of (req.body?.events ?? []) as Array<{ id: string }>) {
      const at = started.get(e.id)
      if (at !== undefined) latencies.push(req.at - at)
    }
  return latencies.sort((a, b) => a - b)
}

async function viaRelay(pgUrl: string, batchSize: number): Promise<Row> {
  const name = `bench_relay_${process.pid}_${batchSize}`
  const admin = new pg.Client({ connectionString: pgUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  let stack: LocalStack | undefined
  let engine: Engine | undefined
  let relay: Relay | undefined
  const receiver = await startReceiver()
  const actions = new pg.Pool({ connectionString: withDatabase(pgUrl, name), max: 2 })
  try {
    stack = await startLocalStack({
      env: { DATABASE_URL: withDatabase(pgUrl, name), LOG_LEVEL: 'error' },
      port: 0,
      sweepIntervalMs: 3_600_000,
      logSink: () => {},
    })
    engine = await startEngine({ pgUrl })
    const project = await engine.createProject({
      hook_a: { url: `${receiver.url}/a`, batchSize },
      hook_b: { url: `${receiver.url}/b`, batchSize },
    })
    const n = await writeBacklog(project)
    const sqs = createSqsClient(
      { AWS_REGION: 'us-east-1', SQS_CONNECT_TIMEOUT_MS: 1000, SQS_REQUEST_TIMEOUT_MS: 3000, SQS_MAX_ATTEMPTS: 2 },
      { endpoint: stack.sqsEndpoint ?? '', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } },
    )
    relay = await startRelay(
      { actions, log: createLogger('error'), metrics: createRelayMetrics(), signals: createSignals(sqs, stack.queueUrl) },
      [{ project: project.slug, url: project.dbUrl }],
      { ...DEFAULT_RELAY_OPTIONS, batchSize: 100, pool: { statementTimeoutMs: 30_000 } },
    )
    return await measured('relay + Actions', batchSize, project, receiver, n)
  } finally {
    await relay?.stop()
    await actions.end()
    await engine?.stop()
    await stack?.stop()
    await receiver.close()
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {})
    await admin.end()
  }
}

/** One way's row: the backlog of `n` drained, then the paced mutations' latencies. */
async function measured(
  way: string,
  batchSize: number,
  project: Parameters<typeof paced>[0],
  receiver: Parameters<typeof paced>[1],
  n: number,
): Promise<Row> {
  const eventsPerSecond = await drained(receiver, n)
  const latencies = await paced(project, receiver)
  return {
    way,
    batchSize,
    eventsPerSecond,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    pacedDelivered: latencies.length,
  }
}

async function viaEngine(pgUrl: string, batchSize: number): Promise<Row> {
  const receiver = await startReceiver()
  const engine = await startEngine({ pgUrl })
  try {
    const project = await engine.createProject({
      hook_a: { url: `${receiver.url}/a`, batchSize },
      hook_b: { url: `${receiver.url}/b`, batchSize },
    })
    const n = await writeBacklog(project)
    await engine.restart({ dispatcher: true })
    return await measured("engine's dispatcher", batchSize, project, receiver, n)
  } finally {
    await engine.stop()
    await receiver.close()
  }
}

async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'
  let pgUrl = process.env.DATABASE_URL
  const embedded = pgUrl ? undefined : await startEmbeddedPostgres()
  pgUrl ??= embedded?.url ?? ''
  const rows: Row[] = []
  try {
    for (const batchSize of [1, 50]) {
      rows.push(await viaRelay(pgUrl, batchSize))
      rows.push(await viaEngine(pgUrl, batchSize))
    }
  } finally {
    await embedded?.stop()
  }
  process.stdout.write(
    `Backlog ${BACKLOG_ARTICLES * 2} events (${BACKLOG_ARTICLES} articles x 2 triggers); ${PACED * 2} paced events, ${PACE_MS} ms apart\n`,
  )
  process.stdout.write(
    table(
      ['way', 'batchSize', 'events/s', 'p50 ms', 'p99 ms', 'paced delivered'],
      rows.map(r => [r.way, String(r.batchSize), int(r.eventsPerSecond), dec(r.p50, 0), dec(r.p99, 0), `${r.pacedDelivered}/${PACED * 2}`]),
    ) + '\n',
  )
}

await main()

/**
 * `npm run bench`: Actions' dispatch against graphile-worker and pg-boss on this machine, plus Actions'
 * enqueue throughput and enqueue-to-delivery latency. See bench/README.md for what each row means.
 *
 * Environment: BENCH_N (events per run, default 20000), BENCH_ROUNDS (default 3), BENCH_DEADLINE_MS
 * (per run, default 120000), BENCH_LATENCY_RATE (events/s, default 500), BENCH_LATENCY_SECONDS,
 * BENCH_BATCH_WINDOW_MS (emulated SQS batching window, default 0), BENCH_ONLY (comma-separated
 * scenario keys), DATABASE_URL (else 127.0.0.1:5432, else an embedded Postgres).
 */
import './quiet.js'
import { cpus, totalmem } from 'node:os'
import { SQSClient } from '@aws-sdk/client-sqs'
import { startFauxqs } from 'fauxqs'
import pg from 'pg'
import { setupActions } from './actions.js'
import { createCpuMeter } from './cpu.js'
import { setupBareClient } from './bare.js'
import { GRAPHILE_MODES, setupGraphile } from './graphile.js'
import { measureLatency, type LatencyResult } from './latency.js'
import { PGBOSS_MODES, setupPgBoss } from './pgboss.js'
import { startPostgres } from './postgres.js'
import { startReceiverProcess } from './receiverProcess.js'
import { report, type Scenario } from './report.js'
import type { RunResult, TimedContext } from './timed.js'

const N = envInt('BENCH_N', 20_000)
const ROUNDS = envInt('BENCH_ROUNDS', 3)
const DEADLINE_MS = envInt('BENCH_DEADLINE_MS', 120_000)
const LATENCY_RATE = envInt('BENCH_LATENCY_RATE', 500)
// 10 s at full size; a smoke run (small BENCH_N) shortens it in proportion, to 2 s at least.
const LATENCY_SECONDS = envInt('BENCH_LATENCY_SECONDS', Math.max(2, Math.min(10, Math.round(N / 2_000))))
const BATCH_WINDOW_MS = envInt('BENCH_BATCH_WINDOW_MS', 0)
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map(s => s.trim())) : undefined
// One short untimed pass per scenario first: JIT, connection pools and keep-alive sockets warm up.
const WARMUP_N = Math.min(1_000, N)
const ENQUEUE_PER_REQUEST = 100
const ENQUEUE_CONCURRENCY = 8

async function main(): Promise<void> {
  const started = Date.now()
  const cleanups: Array<() => Promise<unknown>> = []
  const cleanup = async () => { for (const c of cleanups.splice(0).reverse()) await c().catch(e => log(`cleanup failed: ${String(e)}`)) }
  // An interrupted bench still drops its databases and stops its receiver.
  process.once('SIGINT', () => { void cleanup().finally(() => process.exit(130)) })
  try {
    const server = await startPostgres()
    cleanups.push(() => server.close())
    const receiver = await startReceiverProcess()
    cleanups.push(() => receiver.stop())
    const fauxqs = await startFauxqs({ port: 0, logger: false })
    cleanups.push(() => fauxqs.stop())
    const sqs = new SQSClient({ endpoint: `http://127.0.0.1:${fauxqs.port}`, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
    cleanups.push(async () => { sqs.destroy() })
    const admin = new pg.Client({ connectionString: server.adminUrl })
    await admin.connect()
    cleanups.push(() => admin.end())
    log(`Postgres ${server.version} (${server.source}), receiver ${receiver.url}, N=${N}, rounds=${ROUNDS}`)

    const ctxFor = (database: string): TimedContext => ({
      receiver,
      cpu: createCpuMeter(admin, database, async () => (await receiver.counts()).cpuMicros),
      deadlineMs: DEADLINE_MS,
    })
    const db = { actions: 'bench_actions', graphile: 'bench_graphile', pgboss: 'bench_pgboss' }
    const actions = await setupActions(await server.freshDatabase(db.actions), receiver.url, sqs, fauxqs.createQueue('bench-signals').queueUrl, ctxFor(db.actions))
    cleanups.push(() => actions.close())
    const graphile = await setupGraphile(await server.freshDatabase(db.graphile), receiver.url, ctxFor(db.graphile))
    cleanups.push(() => graphile.close())
    const boss = await setupPgBoss(await server.freshDatabase(db.pgboss), receiver.url, ctxFor(db.pgboss))
    cleanups.push(() => boss.close())
    const bare = setupBareClient(receiver.url, ctxFor(db.actions))
    cleanups.push(() => bare.close())

    const latencyOpts = { rate: LATENCY_RATE, seconds: LATENCY_SECONDS, perRequest: 10, batchWindowMs: BATCH_WINDOW_MS }
    const all: Array<Scenario & { run: (n: number) => Promise<RunResult | LatencyResult> }> = [
      { key: 'actions-b1', contender: 'Actions', scenario: 'drainProject, batchSize 1', kind: 'delivery', run: n => actions.deliver(1, n) },
      { key: 'actions-b50', contender: 'Actions', scenario: 'drainProject, batchSize 50', kind: 'delivery', run: n => actions.deliver(50, n) },
      ...GRAPHILE_MODES.map((mode, i) => ({ key: `graphile-${i + 1}`, contender: 'graphile-worker', scenario: mode.label, kind: 'delivery' as const, run: (n: number) => graphile.deliver(mode, n) })),
      ...PGBOSS_MODES.map((mode, i) => ({ key: `pgboss-${i + 1}`, contender: 'pg-boss', scenario: mode.label, kind: 'delivery' as const, run: (n: number) => boss.deliver(mode, n) })),
      { key: 'bare', contender: 'bare client', scenario: 'undici keep-alive, 1 event/POST, 8 in flight (ceiling)', kind: 'delivery', run: n => bare.deliver(n) },
      { key: 'enqueue', contender: 'Actions', scenario: `enqueue, ${ENQUEUE_PER_REQUEST}/request, ${ENQUEUE_CONCURRENCY} concurrent`, kind: 'enqueue', run: n => actions.enqueueThroughput(n, ENQUEUE_PER_REQUEST, ENQUEUE_CONCURRENCY) },
      { key: 'latency', contender: 'Actions', scenario: `latency, ${LATENCY_RATE}/s for ${LATENCY_SECONDS} s via dispatch handler${BATCH_WINDOW_MS ? `, ${BATCH_WINDOW_MS} ms batching window` : ''}`, kind: 'latency', run: () => measureLatency(actions, fauxqs, sqs, ctxFor(db.actions), latencyOpts) },
    ]
    const scenarios = all.filter(s => !ONLY || ONLY.has(s.key))

    for (const s of scenarios) {
      if (s.kind === 'latency') continue
      const r = await s.run(WARMUP_N)
      log(`warm-up ${s.key}: ${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s${r.note ? ` (${r.note})` : ''}`)
    }
    const results = new Map<string, Array<RunResult | LatencyResult>>(scenarios.map(s => [s.key, []]))
    // Interleaved rounds: a slow patch of the machine hits every contender, not one.
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of scenarios) {
        const r = await s.run(N)
        results.get(s.key)?.push(r)
        log(`round ${round} ${s.key}: ${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s = ${Math.round(r.delivered / r.seconds)}/s` +
          `${r.statementsPerEvent !== undefined ? `, ${r.statementsPerEvent.toFixed(3)} stmts/event` : ''}` +
          `, cpu bench ${r.cpu.bench}% receiver ${r.cpu.receiver}% pg ${r.cpu.postgres}% machine ${r.cpu.machine}%${r.note ? ` (${r.note})` : ''}`)
      }
    }

    process.stdout.write(report({
      scenarios, results,
      header: [
        `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Node ${process.version}; Postgres ${server.version} (${server.source})`,
        `N = ${N} events per run, ${ROUNDS} interleaved round(s) after one warm-up; delivery = 8-way concurrency; wall ${Math.round((Date.now() - started) / 1000)} s`,
      ],
    }))
  } finally {
    await cleanup()
  }
}

function envInt(name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`)
  return n
}

function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`)
}

main().then(
  // Pools and timers of the libraries under test may linger; the bench is done once it has printed.
  () => process.exit(0),
  error => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  },
)

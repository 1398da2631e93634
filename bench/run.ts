/**
 * `npm run bench`: Actions' dispatch against graphile-worker and pg-boss on this machine, the ceiling of
 * one process, scale-out over several dispatch processes, Actions' enqueue throughput, and
 * enqueue-to-delivery latency under load, then the targets with PASS/FAIL. See bench/README.md.
 *
 * `npm run bench -- --quick` is a smoke run; flags and BENCH_* variables are in bench/options.ts.
 * DATABASE_URL names the server (else 127.0.0.1:5432, else an embedded Postgres).
 */
import './quiet.js'
import { readFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { SQSClient } from '@aws-sdk/client-sqs'
import { startFauxqs } from 'fauxqs'
import pg from 'pg'
import { repoFile } from './repo.js'
import { BATCH_SIZES, CAPPED_IN_FLIGHT, FANOUT_TRIGGERS, setupActions } from './actions.js'
import { BARE_LABEL, setupBareClient } from './bare.js'
import { startCollectorProcess } from './collector.js'
import { createCpuMeter } from './cpu.js'
import { deployedEventSource } from './deployment.js'
import { GRAPHILE_MODES, setupGraphile } from './graphile.js'
import { setupHandler } from './handler.js'
import { measureLatency, type LatencyResult } from './latency.js'
import { benchOptions } from './options.js'
import { pgbossModes, setupPgBoss } from './pgboss.js'
import { startPostgres } from './postgres.js'
import { startProducerProcess, type ProducerProcess } from './producerProcess.js'
import { startReceiverProcess } from './receiverProcess.js'
import { report, type Scenario } from './report.js'
import { setupScale, type ScaleBench } from './scale.js'
import { signingTable } from './signing.js'
import { setupTraced, TRACED_SAMPLER } from './traced.js'
import type { RunResult, TimedContext } from './timed.js'

// One short untimed pass per scenario first: JIT, connection pools and keep-alive sockets warm up.
const WARMUP_N = 1_000
const ENQUEUE_PER_REQUEST = 100
const ENQUEUE_CONCURRENCY = 8
const LATENCY_PER_REQUEST = 10
// Enough empty invocations that Postgres' 10 ms CPU ticks (bench/cpu.ts) resolve a few µs each.
const IDLE_INVOCATIONS = 500

type Runnable = Scenario & { run: (n: number) => Promise<RunResult | LatencyResult> }

async function main(): Promise<void> {
  const opts = benchOptions(process.argv.slice(2), process.env)
  const started = Date.now()
  const runtime = runtimeNote()
  for (const line of runtime) log(line)
  const wants = (prefix: string) => !opts.only || [...opts.only].some(k => k.startsWith(prefix))
  const cleanups: Array<() => Promise<unknown>> = []
  const cleanup = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(e => log(`cleanup failed: ${String(e)}`))
  }
  // An interrupted bench still drops its databases and stops its child processes.
  process.once('SIGINT', () => {
    void cleanup().finally(() => process.exit(130))
  })
  try {
    const server = await startPostgres()
    cleanups.push(() => server.close())
    const receiver = await startReceiverProcess()
    cleanups.push(() => receiver.stop())
    // The delivery, scale-out and enqueue rows' signals go to an emulator in this process; the latency
    // rows bring their own, in the producer process (bench/producer.ts), with their load and poller.
    const fauxqs = await startFauxqs({ port: 0, logger: false })
    cleanups.push(() => fauxqs.stop())
    const sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`
    const sqs = new SQSClient({ endpoint: sqsEndpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
    cleanups.push(async () => {
      sqs.destroy()
    })
    const admin = new pg.Client({ connectionString: server.adminUrl })
    await admin.connect()
    cleanups.push(() => admin.end())
    // BENCH_BATCH_WINDOW_MS overrides the deployed window, to see what the window itself costs.
    const deployed = deployedEventSource()
    const source = opts.batchWindowMs === undefined ? deployed : { ...deployed, batchingWindowMs: opts.batchWindowMs }
    log(
      `Postgres ${server.version} (${server.source}), receiver ${receiver.url}, N=${opts.n}, rounds=${opts.rounds}${opts.quick ? ' (quick)' : ''}`,
    )

    let scale: ScaleBench | undefined
    let producer: ProducerProcess | undefined
    const ctxFor = (database: string): TimedContext => ({
      receiver,
      // The scale-out rows' dispatch processes count as the bench's CPU, the producer on its own (0 while they idle).
      cpu: createCpuMeter(admin, database, async () => (await receiver.counts()).cpuMicros, {
        childMicros: async () => (scale ? scale.cpuMicros() : 0),
        producerMicros: async () => (producer ? producer.cpuMicros() : 0),
      }),
      deadlineMs: opts.deadlineMs,
    })
    const db = { actions: 'bench_actions', traced: 'bench_actions_traced', graphile: 'bench_graphile', pgboss: 'bench_pgboss' }
    const actionsUrl = await server.freshDatabase(db.actions)
    const signalQueue = fauxqs.createQueue('bench-signals').queueUrl
    const actions = await setupActions(actionsUrl, receiver.url, sqs, signalQueue, ctxFor(db.actions))
    cleanups.push(() => actions.close())

    // actions-b1 with tracing on, over a database of its own, exporting to a collector in its own process;
    // right after actions-b1 in each round, so that the difference is tracing's and not the machine's.
    const tracedRows: Runnable[] = []
    if (wants('actions-b1-traced')) {
      const collector = await startCollectorProcess()
      cleanups.push(() => collector.stop())
      const traced = await setupTraced(await server.freshDatabase(db.traced), receiver.url, sqs, signalQueue, ctxFor(db.traced), collector)
      cleanups.push(() => traced.close())
      tracedRows.push({
        key: 'actions-b1-traced',
        contender: 'Actions',
        scenario: `drainProject, batchSize 1, tracing on (${TRACED_SAMPLER}, OTLP/HTTP to a collector process)`,
        kind: 'delivery',
        run: n => traced.deliver(n),
      })
    }
    // The same batchSize 1 drain through the dispatch handler's edge (middy, metrics flush, Lambda context),
    // right after drainProject's row in each round, so that the two meet the machine in the same state.
    const viaHandler = setupHandler(actions, sqs, source, ctxFor(db.actions))
    cleanups.push(() => viaHandler.close())
    const all: Runnable[] = [
      { key: 'actions-b1', contender: 'Actions', scenario: 'drainProject, batchSize 1', kind: 'delivery', run: n => actions.deliver(1, n) },
      ...tracedRows,
      {
        key: 'actions-b1-handler',
        contender: 'Actions',
        scenario: 'dispatch handler (middy, EMF flush), batchSize 1',
        kind: 'delivery',
        run: n => viaHandler.deliver(n),
      },
      {
        key: 'actions-b50',
        contender: 'Actions',
        scenario: 'drainProject, batchSize 50',
        kind: 'delivery',
        run: n => actions.deliver(50, n),
      },
    ]
    // Per-entity order (the default, distinct keys above) against none, and with ten events per entity.
    for (const size of BATCH_SIZES) {
      all.push({
        key: `actions-b${size}-none`,
        contender: 'Actions',
        scenario: `drainProject, batchSize ${size}, ordering none`,
        kind: 'delivery',
        run: n => actions.deliver(size, n, 'none'),
      })
      all.push({
        key: `actions-b${size}-keys10`,
        contender: 'Actions',
        scenario: `drainProject, batchSize ${size}, 10 events per entity`,
        kind: 'delivery',
        run: n => actions.deliver(size, n, 'keys10'),
      })
    }
    all.push({
      key: 'actions-b1-capped',
      contender: 'Actions',
      scenario: `drainProject, batchSize 1, half to a maxInFlight ${CAPPED_IN_FLIGHT} target beside an uncapped one`,
      kind: 'delivery',
      run: n => actions.deliverCappedPair(n),
    })
    if (wants('graphile')) {
      const graphile = await setupGraphile(await server.freshDatabase(db.graphile), receiver.url, ctxFor(db.graphile))
      cleanups.push(() => graphile.close())
      all.push(
        ...GRAPHILE_MODES.map((mode, i): Runnable => ({
          key: `graphile-${i + 1}`,
          contender: 'graphile-worker',
          scenario: mode.label,
          kind: 'delivery',
          peer: true,
          run: n => graphile.deliver(mode, n),
        })),
      )
    }
    if (wants('pgboss')) {
      const boss = await setupPgBoss(await server.freshDatabase(db.pgboss), receiver.url, ctxFor(db.pgboss))
      cleanups.push(() => boss.close())
      all.push(
        ...pgbossModes(opts.pgbossBatches).map((mode): Runnable => ({
          key: `pgboss-${mode.batchSize}`,
          contender: 'pg-boss',
          scenario: mode.label,
          kind: 'delivery',
          peer: true,
          run: n => boss.deliver(mode, n),
        })),
      )
    }
    const bare = setupBareClient(receiver.url, ctxFor(db.actions))
    cleanups.push(() => bare.close())
    all.push({ key: 'bare', contender: 'bare client', scenario: BARE_LABEL, kind: 'delivery', run: n => bare.deliver(n) })
    if (wants('scale')) {
      const started = await setupScale(actions, {
        databaseUrl: actionsUrl,
        sqsEndpoint,
        queueUrl: signalQueue,
        ctx: ctxFor(db.actions),
        batchSize: opts.scaleBatch,
        maxProcesses: Math.max(...opts.scaleProcesses),
        maxProjects: Math.max(...opts.scaleProjects),
      })
      scale = started
      cleanups.push(() => started.close())
      for (const projects of opts.scaleProjects) {
        for (const processes of opts.scaleProcesses) {
          all.push({
            key: `scale-${processes}x${projects}`,
            contender: 'Actions',
            kind: 'delivery',
            scale: { processes, projects },
            scenario: `${processes} dispatch process${processes > 1 ? 'es' : ''}, ${projects} project${projects > 1 ? 's' : ''}, batchSize ${opts.scaleBatch}`,
            run: n => started.deliver(processes, projects, n),
          })
        }
      }
    }
    all.push({
      key: 'enqueue',
      contender: 'Actions',
      scenario: `enqueue, ${ENQUEUE_PER_REQUEST}/request, ${ENQUEUE_CONCURRENCY} concurrent`,
      kind: 'enqueue',
      run: n => actions.enqueueThroughput(n, ENQUEUE_PER_REQUEST, ENQUEUE_CONCURRENCY),
    })
    all.push({
      key: 'enqueue-fanout',
      contender: 'Actions',
      kind: 'enqueue',
      scenario: `enqueue, ${ENQUEUE_PER_REQUEST} mutations/request, ${FANOUT_TRIGGERS.toLocaleString('en-US')}-trigger schema, ${ENQUEUE_CONCURRENCY} concurrent`,
      run: n => actions.enqueueThroughput(n, ENQUEUE_PER_REQUEST, ENQUEUE_CONCURRENCY, 'mutations'),
    })
    if (wants('latency')) {
      // The latency rows' AWS side (the enqueue load, the SQS emulator, the event source's poller) runs in
      // a process of their own, as in the deployment; this process keeps only the dispatch handler.
      const started = await startProducerProcess()
      producer = started
      cleanups.push(() => started.stop())
      await started.init(actionsUrl)
      // Per-entity order with distinct keys (the default) and `ordering: 'none'`, at every rate.
      for (const ordering of ['entity', 'none'] as const) {
        for (const rate of opts.latencyRates) {
          all.push({
            key: `latency-${rate}${ordering === 'none' ? '-none' : ''}`,
            contender: 'Actions',
            kind: 'latency',
            rate,
            scenario: `latency, ${rate}/s for ${opts.latencySeconds} s via dispatch handler, ${source.batchingWindowMs} ms batching window${ordering === 'none' ? ', ordering none' : ''}`,
            run: () =>
              measureLatency(actions, started, ctxFor(db.actions), {
                rate,
                seconds: opts.latencySeconds,
                perRequest: LATENCY_PER_REQUEST,
                source,
                ordering,
              }),
          })
        }
      }
    }
    const scenarios = all.filter(s => !opts.only || opts.only.has(s.key))
    if (scenarios.length === 0 && !opts.only?.has('signing'))
      throw new Error(`--only selected no scenario; keys: ${all.map(s => s.key).join(', ')}`)

    for (const s of scenarios) {
      if (s.kind === 'latency') continue
      const r = await s.run(Math.min(WARMUP_N, opts.n))
      log(`warm-up ${s.key}: ${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s${r.note ? ` (${r.note})` : ''}`)
    }
    const results = new Map<string, Array<RunResult | LatencyResult>>(scenarios.map(s => [s.key, []]))
    // Interleaved rounds: a slow patch of the machine hits every contender, not one.
    for (let round = 1; round <= opts.rounds; round++) {
      for (const s of scenarios) {
        const r = await s.run(opts.n)
        results.get(s.key)?.push(r)
        log(
          `round ${round} ${s.key}: ${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s = ${Math.round(r.delivered / r.seconds)}/s` +
            `${r.statementsPerEvent !== undefined ? `, ${r.statementsPerEvent.toFixed(3)} stmts/event` : ''}` +
            `${'p99' in r ? `, p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms` : ''}` +
            `${r.spans !== undefined ? `, ${(r.spans / r.events).toFixed(2)} spans/event` : ''}` +
            `, cpu bench ${r.cpu.bench}% receiver ${r.cpu.receiver}%${producer ? ` producer ${r.cpu.producer}%` : ''} pg ${r.cpu.postgres}% machine ${r.cpu.machine}%${r.note ? ` (${r.note})` : ''}`,
        )
      }
    }

    // What an invocation costs that finds nothing due: the edge alone, once per slice of a backlog.
    const extra: string[] = []
    if (scenarios.some(s => s.key === 'actions-b1-handler')) {
      const idle = await viaHandler.idleInvocations(IDLE_INVOCATIONS)
      extra.push(
        `  one dispatch invocation that finds nothing due (${IDLE_INVOCATIONS} in a row): ${idle.ownUs.toFixed(0)} µs dispatcher and ${idle.pgUs.toFixed(0)} µs Postgres CPU, ${idle.statements.toFixed(1)} statements`,
      )
    }
    process.stdout.write(
      report({
        scenarios,
        results,
        header: [
          `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Node ${process.version}; Postgres ${server.version} (${server.source})`,
          `N = ${opts.n} events per run, ${opts.rounds} interleaved round(s) after one warm-up; delivery = 8-way concurrency; wall ${Math.round((Date.now() - started) / 1000)} s`,
          ...runtime,
        ],
        warnings: runtime,
        informational: extra,
      }),
    )
    // What signing adds per request, measured in this process with nothing else running.
    if (!opts.only || opts.only.has('signing')) process.stdout.write('\n' + signingTable())
  } finally {
    await cleanup()
  }
}

/**
 * A line when this Node is not the deployment's (.nvmrc, Lambda's runtime): the contenders' request
 * paths cost differently per Node major (on Node 20 the peers' AbortSignal timers and streams cost
 * 1.5-2x what they do on 22: `bench/levers-request.ts`' naive client took 68-89 µs per request on 20,
 * 41 µs on 22), so only a run on that major answers the targets.
 */
function runtimeNote(): string[] {
  let deployed: string | undefined
  try {
    deployed = readFileSync(repoFile('.nvmrc'), 'utf8').trim().replace(/^v/, '').split('.')[0]
  } catch {
    return ["NOTE: .nvmrc could not be read, so whether this Node is the deployment's is unknown (bench/README.md)."]
  }
  const here = process.versions.node.split('.')[0]
  return here === deployed
    ? []
    : [
        `NOTE: Node ${here} here; the deployment runs Node ${deployed} (.nvmrc), where the ratios differ: run the bench on Node ${deployed} for the targets (bench/README.md).`,
      ]
}

function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`)
}

main().then(
  // Pools and timers of the libraries under test may linger; the bench is done once it has printed.
  () => process.exit(0),
  error => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)

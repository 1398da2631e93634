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
type Options = ReturnType<typeof benchOptions>
type Cleanups = Array<() => Promise<unknown>>
type Actions = Awaited<ReturnType<typeof setupActions>>
type Handler = ReturnType<typeof setupHandler>
type EventSource = ReturnType<typeof deployedEventSource>

/** What every row runs against: the server, the receiver, this process's SQS emulator and an admin connection. */
type Services = {
  server: Awaited<ReturnType<typeof startPostgres>>
  receiver: Awaited<ReturnType<typeof startReceiverProcess>>
  sqs: SQSClient
  sqsEndpoint: string
  signalQueue: string
  admin: pg.Client
}

/** The child processes whose CPU the meter adds once they exist: the scale-out dispatchers, the latency producer. */
type Children = { scale?: ScaleBench; producer?: ProducerProcess }

const DATABASES = { actions: 'bench_actions', traced: 'bench_actions_traced', graphile: 'bench_graphile', pgboss: 'bench_pgboss' }

async function main(): Promise<void> {
  const opts = benchOptions(process.argv.slice(2), process.env)
  const started = Date.now()
  const runtime = runtimeNote()
  for (const line of runtime) log(line)
  const cleanups: Cleanups = []
  const cleanup = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(e => log(`cleanup failed: ${String(e)}`))
  }
  // An interrupted bench still drops its databases and stops its child processes.
  process.once('SIGINT', () => {
    void cleanup().finally(() => process.exit(130))
  })
  try {
    const services = await startServices(cleanups)
    // BENCH_BATCH_WINDOW_MS overrides the deployed window, to see what the window itself costs.
    const deployed = deployedEventSource()
    const source = opts.batchWindowMs === undefined ? deployed : { ...deployed, batchingWindowMs: opts.batchWindowMs }
    log(
      `Postgres ${services.server.version} (${services.server.source}), receiver ${services.receiver.url}, N=${opts.n}, rounds=${opts.rounds}${opts.quick ? ' (quick)' : ''}`,
    )
    const children: Children = {}
    const ctxFor = contextFor(services, children, opts)
    const actionsUrl = await services.server.freshDatabase(DATABASES.actions)
    const actions = await setupActions(actionsUrl, services.receiver.url, services.sqs, services.signalQueue, ctxFor(DATABASES.actions))
    cleanups.push(() => actions.close())
    // The same batchSize 1 drain through the dispatch handler's edge (middy, metrics flush, Lambda context),
    // right after drainProject's row in each round, so that the two meet the machine in the same state.
    const viaHandler = setupHandler(actions, services.sqs, source, ctxFor(DATABASES.actions))
    cleanups.push(() => viaHandler.close())
    const all: Runnable[] = [
      ...(await actionsRows(actions, viaHandler, services, ctxFor, opts, cleanups)),
      ...(await peerRows(services, ctxFor, opts, cleanups)),
      ...(await scaleRows(actions, actionsUrl, services, ctxFor, opts, children, cleanups)),
      ...enqueueRows(actions),
      ...(await latencyRows(actions, actionsUrl, source, ctxFor, opts, children, cleanups)),
    ]
    const scenarios = all.filter(s => !opts.only || opts.only.has(s.key))
    if (scenarios.length === 0 && !opts.only?.has('signing'))
      throw new Error(`--only selected no scenario; keys: ${all.map(s => s.key).join(', ')}`)
    const results = await runRounds(scenarios, opts, children)
    const informational = await idleInvocationLine(scenarios, viaHandler)
    const machine = `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Node ${process.version}`
    const header = [
      `${machine}; Postgres ${services.server.version} (${services.server.source})`,
      `N = ${opts.n} events per run, ${opts.rounds} interleaved round(s) after one warm-up; delivery = 8-way concurrency; wall ${Math.round((Date.now() - started) / 1000)} s`,
      ...runtime,
    ]
    process.stdout.write(report({ scenarios, results, header, warnings: runtime, informational }))
    // What signing adds per request, measured in this process with nothing else running.
    if (!opts.only || opts.only.has('signing')) process.stdout.write('\n' + signingTable())
  } finally {
    await cleanup()
  }
}

/** Whether a selection (--only) names a row whose key starts with `prefix`; everything without one. */
const wants = (opts: Options, prefix: string) => !opts.only || [...opts.only].some(k => k.startsWith(prefix))

/** The server, the receiver process, an SQS emulator in this process and an admin connection, each stopped by a cleanup. */
async function startServices(cleanups: Cleanups): Promise<Services> {
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
  return { server, receiver, sqs, sqsEndpoint, signalQueue: fauxqs.createQueue('bench-signals').queueUrl, admin }
}

/** A row's timing context over its contender's database: the CPU meter counts the children once they exist. */
function contextFor(services: Services, children: Children, opts: Options): (database: string) => TimedContext {
  const { receiver, admin } = services
  return database => ({
    receiver,
    // The scale-out rows' dispatch processes count as the bench's CPU, the producer on its own (0 while they idle).
    cpu: createCpuMeter(admin, database, async () => (await receiver.counts()).cpuMicros, {
      childMicros: async () => (children.scale ? children.scale.cpuMicros() : 0),
      producerMicros: async () => (children.producer ? children.producer.cpuMicros() : 0),
    }),
    deadlineMs: opts.deadlineMs,
  })
}

/** Actions' delivery rows: drainProject at both batch sizes and orderings, the traced and handler rows, the capped pair. */
async function actionsRows(
  actions: Actions,
  viaHandler: Handler,
  services: Services,
  ctxFor: (database: string) => TimedContext,
  opts: Options,
  cleanups: Cleanups,
): Promise<Runnable[]> {
  const row = (key: string, scenario: string, run: Runnable['run']): Runnable => ({
    key,
    contender: 'Actions',
    scenario,
    kind: 'delivery',
    run,
  })
  // actions-b1 with tracing on, over a database of its own, exporting to a collector in its own process;
  // right after actions-b1 in each round, so that the difference is tracing's and not the machine's.
  const tracedRows: Runnable[] = []
  if (wants(opts, 'actions-b1-traced')) {
    const collector = await startCollectorProcess()
    cleanups.push(() => collector.stop())
    const db = await services.server.freshDatabase(DATABASES.traced)
    const traced = await setupTraced(db, services.receiver.url, services.sqs, services.signalQueue, ctxFor(DATABASES.traced), collector)
    cleanups.push(() => traced.close())
    const scenario = `drainProject, batchSize 1, tracing on (${TRACED_SAMPLER}, OTLP/HTTP to a collector process)`
    tracedRows.push(row('actions-b1-traced', scenario, n => traced.deliver(n)))
  }
  const rows: Runnable[] = [
    row('actions-b1', 'drainProject, batchSize 1', n => actions.deliver(1, n)),
    ...tracedRows,
    row('actions-b1-handler', 'dispatch handler (middy, EMF flush), batchSize 1', n => viaHandler.deliver(n)),
    row('actions-b50', 'drainProject, batchSize 50', n => actions.deliver(50, n)),
  ]
  // Per-entity order (the default, distinct keys above) against none, and with ten events per entity.
  for (const size of BATCH_SIZES) {
    rows.push(row(`actions-b${size}-none`, `drainProject, batchSize ${size}, ordering none`, n => actions.deliver(size, n, 'none')))
    rows.push(
      row(`actions-b${size}-keys10`, `drainProject, batchSize ${size}, 10 events per entity`, n => actions.deliver(size, n, 'keys10')),
    )
  }
  const capped = `drainProject, batchSize 1, half to a maxInFlight ${CAPPED_IN_FLIGHT} target beside an uncapped one`
  rows.push(row('actions-b1-capped', capped, n => actions.deliverCappedPair(n)))
  return rows
}

/** The peers' rows (graphile-worker, pg-boss) and the bare client's ceiling. */
async function peerRows(
  services: Services,
  ctxFor: (database: string) => TimedContext,
  opts: Options,
  cleanups: Cleanups,
): Promise<Runnable[]> {
  const rows: Runnable[] = []
  if (wants(opts, 'graphile')) {
    const graphile = await setupGraphile(
      await services.server.freshDatabase(DATABASES.graphile),
      services.receiver.url,
      ctxFor(DATABASES.graphile),
    )
    cleanups.push(() => graphile.close())
    rows.push(
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
  if (wants(opts, 'pgboss')) {
    const boss = await setupPgBoss(await services.server.freshDatabase(DATABASES.pgboss), services.receiver.url, ctxFor(DATABASES.pgboss))
    cleanups.push(() => boss.close())
    rows.push(
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
  const bare = setupBareClient(services.receiver.url, ctxFor(DATABASES.actions))
  cleanups.push(() => bare.close())
  rows.push({ key: 'bare', contender: 'bare client', scenario: BARE_LABEL, kind: 'delivery', run: n => bare.deliver(n) })
  return rows
}

/** The scale-out grid: P dispatch processes draining J projects, each a forked child. */
async function scaleRows(
  actions: Actions,
  actionsUrl: string,
  services: Services,
  ctxFor: (database: string) => TimedContext,
  opts: Options,
  children: Children,
  cleanups: Cleanups,
): Promise<Runnable[]> {
  if (!wants(opts, 'scale')) return []
  const scale = await setupScale(actions, {
    databaseUrl: actionsUrl,
    sqsEndpoint: services.sqsEndpoint,
    queueUrl: services.signalQueue,
    ctx: ctxFor(DATABASES.actions),
    batchSize: opts.scaleBatch,
    maxProcesses: Math.max(...opts.scaleProcesses),
    maxProjects: Math.max(...opts.scaleProjects),
  })
  children.scale = scale
  cleanups.push(() => scale.close())
  const plural = (n: number, word: string, suffix: string) => `${n} ${word}${n > 1 ? suffix : ''}`
  return opts.scaleProjects.flatMap(projects =>
    opts.scaleProcesses.map((processes): Runnable => ({
      key: `scale-${processes}x${projects}`,
      contender: 'Actions',
      kind: 'delivery',
      scale: { processes, projects },
      scenario: `${plural(processes, 'dispatch process', 'es')}, ${plural(projects, 'project', 's')}, batchSize ${opts.scaleBatch}`,
      run: n => scale.deliver(processes, projects, n),
    })),
  )
}

/** Enqueue throughput: events given whole, and mutations fanned out over a large trigger schema. */
function enqueueRows(actions: Actions): Runnable[] {
  const triggers = FANOUT_TRIGGERS.toLocaleString('en-US')
  return [
    {
      key: 'enqueue',
      contender: 'Actions',
      scenario: `enqueue, ${ENQUEUE_PER_REQUEST}/request, ${ENQUEUE_CONCURRENCY} concurrent`,
      kind: 'enqueue',
      run: n => actions.enqueueThroughput(n, ENQUEUE_PER_REQUEST, ENQUEUE_CONCURRENCY),
    },
    {
      key: 'enqueue-fanout',
      contender: 'Actions',
      kind: 'enqueue',
      scenario: `enqueue, ${ENQUEUE_PER_REQUEST} mutations/request, ${triggers}-trigger schema, ${ENQUEUE_CONCURRENCY} concurrent`,
      run: n => actions.enqueueThroughput(n, ENQUEUE_PER_REQUEST, ENQUEUE_CONCURRENCY, 'mutations'),
    },
  ]
}

/** Enqueue-to-delivery latency at each offered rate, per-entity order and none, through the producer process. */
async function latencyRows(
  actions: Actions,
  actionsUrl: string,
  source: EventSource,
  ctxFor: (database: string) => TimedContext,
  opts: Options,
  children: Children,
  cleanups: Cleanups,
): Promise<Runnable[]> {
  if (!wants(opts, 'latency')) return []
  // The latency rows' AWS side (the enqueue load, the SQS emulator, the event source's poller) runs in
  // a process of their own, as in the deployment; this process keeps only the dispatch handler.
  const producer = await startProducerProcess()
  children.producer = producer
  cleanups.push(() => producer.stop())
  await producer.init(actionsUrl)
  // Per-entity order with distinct keys (the default) and `ordering: 'none'`, at every rate.
  return (['entity', 'none'] as const).flatMap(ordering =>
    opts.latencyRates.map((rate): Runnable => ({
      key: `latency-${rate}${ordering === 'none' ? '-none' : ''}`,
      contender: 'Actions',
      kind: 'latency',
      rate,
      scenario: `latency, ${rate}/s for ${opts.latencySeconds} s via dispatch handler, ${source.batchingWindowMs} ms batching window${ordering === 'none' ? ', ordering none' : ''}`,
      run: () =>
        measureLatency(actions, producer, ctxFor(DATABASES.actions), {
          rate,
          seconds: opts.latencySeconds,
          perRequest: LATENCY_PER_REQUEST,
          source,
          ordering,
        }),
    })),
  )
}

/** One untimed warm-up per row, then the interleaved rounds: a slow patch of the machine hits every contender, not one. */
async function runRounds(scenarios: Runnable[], opts: Options, children: Children): Promise<Map<string, Array<RunResult | LatencyResult>>> {
  for (const s of scenarios) {
    if (s.kind === 'latency') continue
    const r = await s.run(Math.min(WARMUP_N, opts.n))
    log(`warm-up ${s.key}: ${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s${r.note ? ` (${r.note})` : ''}`)
  }
  const results = new Map<string, Array<RunResult | LatencyResult>>(scenarios.map(s => [s.key, []]))
  for (let round = 1; round <= opts.rounds; round++) {
    for (const s of scenarios) {
      const r = await s.run(opts.n)
      results.get(s.key)?.push(r)
      log(`round ${round} ${s.key}: ${roundLine(r, children.producer !== undefined)}`)
    }
  }
  return results
}

/** A round's progress line: throughput, statements, latency and spans where measured, and the CPU shares. */
function roundLine(r: RunResult | LatencyResult, producer: boolean): string {
  return (
    `${r.delivered}/${r.events} in ${r.seconds.toFixed(2)} s = ${Math.round(r.delivered / r.seconds)}/s` +
    `${r.statementsPerEvent !== undefined ? `, ${r.statementsPerEvent.toFixed(3)} stmts/event` : ''}` +
    `${'p99' in r ? `, p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms` : ''}` +
    `${r.spans !== undefined ? `, ${(r.spans / r.events).toFixed(2)} spans/event` : ''}` +
    `, cpu bench ${r.cpu.bench}% receiver ${r.cpu.receiver}%${producer ? ` producer ${r.cpu.producer}%` : ''} pg ${r.cpu.postgres}% machine ${r.cpu.machine}%${r.note ? ` (${r.note})` : ''}`
  )
}

/** What an invocation costs that finds nothing due: the edge alone, once per slice of a backlog. */
async function idleInvocationLine(scenarios: readonly Runnable[], viaHandler: Handler): Promise<string[]> {
  if (!scenarios.some(s => s.key === 'actions-b1-handler')) return []
  const idle = await viaHandler.idleInvocations(IDLE_INVOCATIONS)
  return [
    `  one dispatch invocation that finds nothing due (${IDLE_INVOCATIONS} in a row): ${idle.ownUs.toFixed(0)} µs dispatcher and ${idle.pgUs.toFixed(0)} µs Postgres CPU, ${idle.statements.toFixed(1)} statements`,
  ]
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

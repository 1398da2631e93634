// `npm run soak`: the local stack under steady load for a bounded time, with faults, printing what an
// operator watches per window and, at the end, what was lost, sent twice, logged as an error, and how
// memory moved. Never part of `npm test`. It starts its own embedded Postgres (pausing it disturbs
// nobody else) and its own SQS emulator; everything listens on 127.0.0.1.
//
//   npm run soak -- --seconds 600 --projects 200 --rate 300 --timeout-ms 2000
//
// Each project has two targets: `ok` (a healthy receiver) and `flaky` (answers 500 to --fail of its
// requests and hangs past the target's timeout on --hang of them; 75 % answered by default). One more
// project's only target refuses everything: the breaker must pause it within its first batches, and
// must never pause a flaky one. Every --restart-every seconds both receivers are killed for 2 s; at
// half time Postgres is frozen (SIGSTOP) for --pg-pause-ms.
import { readdirSync, readFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { startLocalStack } from '../local/stack.js'
import { startSoakReceiver, type Answer } from './soak-receivers.js'
import { percentile } from './stats.js'

/** The longest soak allowed: a run is bounded in time whatever it is asked. */
const MAX_SECONDS = 3_600
/** After the load stops, how long the backlog may take to drain before the soak counts what is left. */
const DRAIN_LIMIT_MS = 120_000
/** Bounded waits of the soak's own statistics queries (they must not hang on the frozen Postgres). */
const STATS_TIMEOUT_MS = 2_000
/** How long a receiver stays down when killed. */
const RECEIVER_DOWN_MS = 2_000

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '600' },
    projects: { type: 'string', default: '200' },
    rate: { type: 'string', default: '300' },
    'timeout-ms': { type: 'string', default: '2000' },
    'window-s': { type: 'string', default: '30' },
    fail: { type: 'string', default: '0.22' },
    hang: { type: 'string', default: '0.03' },
    'restart-every': { type: 'string', default: '120' },
    'pg-pause-ms': { type: 'string', default: '5000' },
  },
})
const num = (name: keyof typeof args, min: number, max: number): number => {
  const v = Number(args[name])
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`--${name} must be a number from ${min} to ${max}`)
  return v
}
const opts = {
  seconds: num('seconds', 10, MAX_SECONDS),
  projects: Math.trunc(num('projects', 1, 10_000)),
  rate: num('rate', 1, 5_000),
  timeoutMs: Math.trunc(num('timeout-ms', 100, 60_000)),
  windowS: num('window-s', 5, 600),
  fail: num('fail', 0, 1),
  hang: num('hang', 0, 1),
  restartEveryS: num('restart-every', 5, MAX_SECONDS),
  pgPauseMs: Math.trunc(num('pg-pause-ms', 0, 60_000)),
}

type Fault = { what: string; from: number; to: number; healthy: boolean }
const faults: Fault[] = []
const logs = { error: 0, warn: 0, pauses: new Map<string, number>(), errorSamples: [] as string[] }
/** Every 'paused' log line: which target, when. */
const pauseTimes: Array<{ target: string; at: number }> = []

function sink(line: string): void {
  let rec: { level?: string; msg?: string; target?: string; project?: string }
  try {
    rec = JSON.parse(line)
  } catch {
    return
  }
  if (rec.level === 'error') {
    logs.error++
    if (logs.errorSamples.length < 5) logs.errorSamples.push(line.slice(0, 300))
  }
  if (rec.level === 'warn') logs.warn++
  if (rec.msg?.startsWith('Webhook target paused') && rec.target) {
    logs.pauses.set(rec.target, (logs.pauses.get(rec.target) ?? 0) + 1)
    pauseTimes.push({ target: rec.target, at: Date.now() })
  }
}

const healthy = await startSoakReceiver(() => 'ok')
const flaky = await startSoakReceiver((): Answer => {
  const r = Math.random()
  return r < opts.hang ? 'hang' : r < opts.hang + opts.fail ? 'fail' : 'ok'
})
const dead = await startSoakReceiver(() => 'fail')
const stack = await startLocalStack({
  env: { LOG_LEVEL: 'warn', MAX_TARGET_TIMEOUT_MS: String(Math.max(30_000, opts.timeoutMs)) },
  port: 0,
  logSink: sink,
  print: line => console.log(line),
})
const stats = new pg.Pool({
  connectionString: stack.databaseUrl,
  max: 1,
  connectionTimeoutMillis: STATS_TIMEOUT_MS,
  query_timeout: STATS_TIMEOUT_MS,
})
stats.on('error', () => {})
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

const projects = Array.from({ length: opts.projects }, (_, i) => `soak${i}`)
async function put(path: string, body: unknown): Promise<unknown> {
  const res = await fetch(stack.url + path, {
    method: path.startsWith('/schema') ? 'PUT' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  })
  if (!res.ok) throw new Error(`${path}: ${res.status} ${(await res.text()).slice(0, 200)}`)
  return res.json()
}
const trigger = (name: string, target: string) => ({
  type: 'basic',
  name,
  entity: 'Article',
  create: true,
  delete: false,
  update: false,
  target,
})
for (const p of projects) {
  await put(`/schema/${p}`, {
    targets: {
      ok: { type: 'webhook', name: 'ok', url: `${healthy.url}/${p}` },
      flaky: { type: 'webhook', name: 'flaky', url: `${flaky.url}/${p}`, timeoutMs: opts.timeoutMs, initialRepeatIntervalMs: 1000 },
    },
    triggers: { to_ok: trigger('to_ok', 'ok'), to_flaky: trigger('to_flaky', 'flaky') },
  })
}
await put('/schema/soakdead', {
  targets: { dead: { type: 'webhook', name: 'dead', url: dead.url, initialRepeatIntervalMs: 1000 } },
  triggers: { to_dead: trigger('to_dead', 'dead') },
})

/** Per event id: when its enqueue was sent, and to which target. */
const sent = new Map<string, { at: number; target: 'ok' | 'flaky' | 'dead' }>()
let enqueueErrors = 0
let inFlightEnqueues = 0
/** Enqueues in flight at most: a stalled database must not pile up requests without bound. */
const MAX_ENQUEUES_IN_FLIGHT = 500

async function enqueueOne(project: string, target: 'ok' | 'flaky' | 'dead'): Promise<void> {
  if (inFlightEnqueues >= MAX_ENQUEUES_IN_FLIGHT) {
    enqueueErrors++
    return
  }
  inFlightEnqueues++
  const at = Date.now()
  try {
    const body = {
      project,
      transactionId: randomUUID(),
      events: [
        { trigger: `to_${target}`, payload: { operation: 'create', entity: 'Article', id: randomUUID(), values: { title: 'soak' } } },
      ],
    }
    const res = (await put('/enqueue', body)) as { eventIds?: string[] }
    for (const id of res.eventIds ?? []) sent.set(id, { at, target })
  } catch (e) {
    if (enqueueErrors++ === 0) console.log(`first enqueue error: ${String(e).slice(0, 300)}`)
  } finally {
    inFlightEnqueues--
  }
}

const t0 = Date.now()
const endAt = t0 + opts.seconds * 1000
const tickMs = 100
let carry = 0
const load = setInterval(() => {
  if (Date.now() >= endAt) return
  carry += (opts.rate * tickMs) / 1000
  for (; carry >= 1; carry--) {
    const project = projects[Math.floor(Math.random() * projects.length)] ?? 'soak0'
    void enqueueOne(project, Math.random() < 0.5 ? 'ok' : 'flaky')
  }
  // The dead target gets about one event a second.
  if (Math.random() < tickMs / 1000) void enqueueOne('soakdead', 'dead')
}, tickMs)

// Faults: receivers killed every --restart-every seconds (both, 2 s down); Postgres frozen at half time.
const restarts = setInterval(() => {
  const from = Date.now()
  faults.push({ what: 'receivers restarted', from, to: from + RECEIVER_DOWN_MS, healthy: true })
  void Promise.all([healthy.restart(RECEIVER_DOWN_MS), flaky.restart(RECEIVER_DOWN_MS)])
}, opts.restartEveryS * 1000)
const pgPause = setTimeout(() => void pausePostgres(opts.pgPauseMs), (opts.seconds * 1000) / 2)

/** Freezes the soak's own Postgres (the postmaster and every backend) for `ms`, then lets it go on. */
async function pausePostgres(ms: number): Promise<void> {
  const root = stack.postgresPid
  if (ms === 0 || root === undefined) return
  const pids = [root, ...descendants(root)]
  const from = Date.now()
  faults.push({ what: `postgres paused ${ms} ms`, from, to: from + ms, healthy: true })
  for (const pid of pids) signal(pid, 'SIGSTOP')
  await sleep(ms)
  for (const pid of pids) signal(pid, 'SIGCONT')
}
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig)
  } catch {
    // gone meanwhile
  }
}
/** Process ids whose parent chain leads to `root` (read from /proc). */
function descendants(root: number): number[] {
  const parent = new Map<number, number>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      parent.set(Number(name), ppid)
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = []
  for (const pid of parent.keys()) {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === root) {
        out.push(pid)
        break
      }
    }
  }
  return out
}

async function dbStats(): Promise<{ backlog: string; tableMb: string; dead: string }> {
  try {
    const { rows } = await stats.query<{ backlog: number; bytes: string; dead: string }>(
      `SELECT (SELECT count(*) FROM actions_event WHERE state IN ('created', 'retrying', 'processing'))::int AS backlog,
              pg_total_relation_size('actions_event')::text AS bytes,
              (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'actions_event')::text AS dead`,
    )
    const r = rows[0]
    return { backlog: String(r?.backlog ?? '-'), tableMb: ((Number(r?.bytes) || 0) / 1e6).toFixed(1), dead: r?.dead ?? '-' }
  } catch {
    return { backlog: '-', tableMb: '-', dead: '-' }
  }
}
const rssMb = () => process.memoryUsage().rss / 1e6
const fds = () => readdirSync('/proc/self/fd').length

console.log(
  `soak: ${opts.seconds} s, ${opts.projects} projects x 2 targets, ${opts.rate} events/s, flaky: ${opts.fail * 100} % 500 + ${opts.hang * 100} % hang at timeoutMs ${opts.timeoutMs}`,
)
// healthy: every healthy delivery answered in the window; clear: those whose life met no fault.
console.log('window  healthy p50/p99 clear p50/p99 n      pauses flaky/dead  backlog  rss MB  fds  table MB  dead tuples  faults')
const rssSamples: Array<{ t: number; rss: number }> = []
let windowStart = t0
let pausesBefore = { flaky: 0, dead: 0 }
const outsideFaultP99: number[] = []
while (Date.now() < endAt) {
  await sleep(Math.min(opts.windowS * 1000, endAt - Date.now()))
  const windowEnd = Date.now()
  // Healthy deliveries answered in this window; `clear`: those whose life (enqueue to answer) met no fault.
  const lat: number[] = []
  const clear: number[] = []
  for (const [id, s] of healthy.seen) {
    const e = sent.get(id)
    if (!e || s.okAt === undefined || s.okAt < windowStart || s.okAt >= windowEnd) continue
    lat.push(s.okAt - e.at)
    const okAt = s.okAt
    if (!faults.some(f => f.healthy && f.from <= okAt && f.to >= e.at)) clear.push(okAt - e.at)
  }
  lat.sort((a, b) => a - b)
  clear.sort((a, b) => a - b)
  const p = { flaky: logs.pauses.get('flaky') ?? 0, dead: logs.pauses.get('dead') ?? 0 }
  const db = await dbStats()
  const inWindow = faults.filter(f => f.from < windowEnd && f.to > windowStart)
  const rss = rssMb()
  rssSamples.push({ t: windowEnd, rss })
  const p99 = lat.length ? percentile(lat, 0.99) : NaN
  if (clear.length) outsideFaultP99.push(percentile(clear, 0.99))
  console.log(
    [
      `${Math.round((windowEnd - t0) / 1000)}s`.padEnd(7),
      `${lat.length ? percentile(lat, 0.5).toFixed(0) : '-'}/${lat.length ? p99.toFixed(0) : '-'}`.padEnd(15),
      `${clear.length ? percentile(clear, 0.5).toFixed(0) : '-'}/${clear.length ? percentile(clear, 0.99).toFixed(0) : '-'}`.padEnd(13),
      String(lat.length).padEnd(6),
      `${p.flaky - pausesBefore.flaky}/${p.dead - pausesBefore.dead}`.padEnd(19),
      db.backlog.padEnd(8),
      rss.toFixed(0).padEnd(7),
      String(fds()).padEnd(4),
      db.tableMb.padEnd(9),
      db.dead.padEnd(12),
      inWindow.map(f => f.what).join(', ') || '-',
    ].join(' '),
  )
  pausesBefore = p
  windowStart = windowEnd
}
clearInterval(load)
clearInterval(restarts)
clearTimeout(pgPause)

// Drain: wait (bounded) until nothing is due or in flight, then count.
const drainStart = Date.now()
for (;;) {
  while (inFlightEnqueues > 0 && Date.now() - drainStart < DRAIN_LIMIT_MS) await sleep(100)
  const { backlog } = await dbStats()
  // The dead target's events wait on its pause for good: they are not backlog a drain can end.
  const { rows } = await stats
    .query<{ n: number }>(
      `SELECT count(*)::int AS n FROM actions_event WHERE state IN ('created', 'retrying', 'processing') AND target <> 'dead'`,
    )
    .catch(() => ({ rows: [{ n: -1 }] }))
  if ((rows[0]?.n ?? -1) === 0 || Date.now() - drainStart > DRAIN_LIMIT_MS) {
    console.log(`drained in ${((Date.now() - drainStart) / 1000).toFixed(1)} s (backlog ${backlog}, dead target's waiting events included)`)
    break
  }
  await sleep(1000)
}

const { rows: states } = await stats.query<{ id: string; state: string; target: string }>(
  `SELECT id::text, state, target FROM actions_event WHERE project LIKE 'soak%'`,
)
const stateOf = new Map(states.map(r => [r.id, r.state]))
let lost = 0
let pending = 0
for (const [id, e] of sent) {
  if (e.target === 'dead') continue
  const s = stateOf.get(id)
  if (s === undefined || s === 'failed' || s === 'stopped') lost++
  else if (s !== 'succeed') pending++
}
// Sent twice by us: an event answered 2xx that arrived again. A restart or the Postgres pause can cut
// a batch whose 2xx never reached us (or whose record could not be written in time); those are counted apart.
let dupes = 0
let dupesNearFault = 0
for (const r of [healthy, flaky]) {
  for (const [, s] of r.seen) {
    if (s.okCount < 2 || s.okAt === undefined) continue
    const at = s.okAt
    if (faults.some(f => at >= f.from - 1_000 && at <= f.to + opts.timeoutMs + 1_000)) dupesNearFault++
    else dupes++
  }
}
const warm = rssSamples.filter(s => s.t - t0 >= Math.min(120_000, (opts.seconds * 1000) / 3))
const slope = rssSlopeMbPerMin(warm)
const deadPauseAt = pauseTimes.find(p => p.target === 'dead')?.at
console.log('--- end')
console.log(`enqueued ${sent.size} (enqueue errors ${enqueueErrors}), lost ${lost}, still pending ${pending}`)
console.log(`duplicated ${dupes} outside faults, ${dupesNearFault} in batches a fault cut`)
const flakyPauses = pauseTimes.filter(p => p.target === 'flaky')
// A pause up to a probe interval after a fault may be the fault's: the receivers were truly down.
const flakyOutside = flakyPauses.filter(p => !faults.some(f => p.at >= f.from && p.at <= f.to + 30_000)).length
console.log(`flaky pauses outside faults ${flakyOutside}`)
console.log(
  `pauses: flaky ${logs.pauses.get('flaky') ?? 0}, dead ${logs.pauses.get('dead') ?? 0} (first after ${deadPauseAt ? ((deadPauseAt - t0) / 1000).toFixed(1) + ' s' : '-'}, ${dead.answers.fail} requests to it in all)`,
)
console.log(
  `healthy p99 of deliveries that met no fault: worst window ${outsideFaultP99.length ? Math.max(...outsideFaultP99).toFixed(0) : '-'} ms`,
)
console.log(`error lines ${logs.error}, warn lines ${logs.warn}`)
for (const line of logs.errorSamples) console.log(`  ${line}`)
console.log(
  `rss ${warm[0]?.rss.toFixed(0) ?? '-'} MB after warm-up -> ${rssSamples.at(-1)?.rss.toFixed(0) ?? '-'} MB at the end, trend ${slope.toFixed(2)} MB/min; fds ${fds()}`,
)
console.log(`flaky receiver answers: ${JSON.stringify(flaky.answers)}`)

await stats.end()
await stack.stop()
await Promise.all([healthy.close(), flaky.close(), dead.close()])
console.log(`rss after stop ${rssMb().toFixed(0)} MB, fds ${fds()}`)
process.exit(0)

/** Least-squares slope of RSS over time, in MB per minute (0 with fewer than two samples). */
function rssSlopeMbPerMin(samples: ReadonlyArray<{ t: number; rss: number }>): number {
  if (samples.length < 2) return 0
  const n = samples.length
  const mt = samples.reduce((a, s) => a + s.t, 0) / n
  const mr = samples.reduce((a, s) => a + s.rss, 0) / n
  const num = samples.reduce((a, s) => a + (s.t - mt) * (s.rss - mr), 0)
  const den = samples.reduce((a, s) => a + (s.t - mt) ** 2, 0)
  return den === 0 ? 0 : (num / den) * 60_000
}

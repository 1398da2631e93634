/**
 * `npx tsx bench/profile.ts [batchSize] [n]`: one Actions drain, instrumented. Prints how long the
 * claim and record statements take (by tenths of the run, to show any drift), how many batches each
 * claim returns, the POST durations, the CPU split, the dispatcher's CPU per event (user and system)
 * and how often its event loop thread was preempted. A tool for finding where the time goes; not
 * part of `npm run bench`. With PROFILE_CPU=file.cpuprofile it also writes a CPU profile of this process
 * covering the measured drain only (open it in Chrome DevTools or speedscope). Under tsx each function
 * is attributed to its file; run from the bundle (`npx tsx bench/build.ts`, then
 * `node .bench-build/bench/profile.mjs`), the deployed shape, it is attributed by the module comments
 * esbuild writes into the bundle. PROFILE_ALLOC=1 samples
 * the drain's allocations (collected objects too) and prints bytes per event by allocating function:
 * what the garbage collector has to sweep. PROFILE_DB_SET=name=value,... applies database settings
 * first (e.g. synchronous_commit=off, random_page_cost=1.1).
 */
import './quiet.js'
import { readFile, writeFile } from 'node:fs/promises'
import type { HeapProfiler } from 'node:inspector'
import { Session } from 'node:inspector/promises'
import { SQSClient } from '@aws-sdk/client-sqs'
import { startFauxqs } from 'fauxqs'
import pg from 'pg'
import { CLAIM_SQL } from '../lib/db/claim.js'
import { RECORD_OK_SQL, RECORD_SQL } from '../lib/db/record.js'
import { RELEASE_SQL } from '../lib/db/release.js'
import { drainProject } from '../lib/dispatch/drain.js'
import { project, setupActions } from './actions.js'
import { now } from './clock.js'
import { createCpuMeter } from './cpu.js'
import { startPostgres } from './postgres.js'
import { startReceiverProcess } from './receiverProcess.js'
import { onEveryQuery } from './statements.js'
import { percentile } from './stats.js'

const batchSize = Number(process.argv[2] ?? 1)
const n = Number(process.argv[3] ?? 20_000)

type Timing = { kind: string; start: number; ms: number; rows: number }

async function main(): Promise<void> {
  const server = await startPostgres()
  const receiver = await startReceiverProcess()
  const fauxqs = await startFauxqs({ port: 0, logger: false })
  const sqs = new SQSClient({
    endpoint: `http://127.0.0.1:${fauxqs.port}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  })
  const admin = new pg.Client({ connectionString: server.adminUrl })
  await admin.connect()
  const dbName = 'bench_profile'
  const cpu = createCpuMeter(admin, dbName, async () => (await receiver.counts()).cpuMicros)
  const url = await server.freshDatabase(dbName)
  // Experiment knob: database settings to try, e.g. synchronous_commit=off (what commit flushes cost).
  for (const setting of (process.env.PROFILE_DB_SET ?? '').split(',').filter(Boolean)) {
    const [name, value] = setting.split('=')
    if (!name || !value || !/^[a-z_.]+$/.test(name)) throw new Error(`PROFILE_DB_SET: expected name=value, got ${setting}`)
    await admin.query(`ALTER DATABASE ${dbName} SET ${name} = ${pg.Client.prototype.escapeLiteral(value)}`)
  }
  const actions = await setupActions(url, receiver.url, sqs, fauxqs.createQueue('p').queueUrl, { receiver, cpu, deadlineMs: 120_000 })
  try {
    const timings: Timing[] = []
    instrument(actions.deps.db, timings)
    // Warm-up, then the measured drain.
    for (const size of [1_000, n]) {
      await actions.truncate()
      await actions.prepare(project(batchSize), size)
      timings.length = 0
      await receiver.reset(size)
      const measured = await measureDrain(actions, { admin, dbName, cpu, timings }, size === n)
      if (size === n) await printProfile(measured, dbName)
    }
  } finally {
    await actions.close()
    await admin.end()
    sqs.destroy()
    await fauxqs.stop()
    await receiver.stop()
    await server.close()
  }
}

type Drained = Awaited<ReturnType<typeof measureDrain>>

/** One drain of the prepared backlog with every meter running; the profilers only when `profiled`. */
async function measureDrain(
  actions: Awaited<ReturnType<typeof setupActions>>,
  m: { admin: pg.Client; dbName: string; cpu: ReturnType<typeof createCpuMeter>; timings: Timing[] },
  profiled: boolean,
) {
  const posts: number[] = []
  const profiler = profiled ? await startProfiler() : undefined
  const allocations = profiled ? await startAllocationSampling() : undefined
  const waits = sampleWaits(m.admin, m.dbName)
  const cpuStart = await m.cpu.start()
  const elu0 = performance.eventLoopUtilization()
  const usage0 = process.cpuUsage()
  const switches0 = await contextSwitches()
  const main0 = await mainThreadMicros()
  const t0 = now()
  const result = await drainProject(actions.deps, project(batchSize), {
    remainingMs: () => Infinity,
    onBatch: b => {
      posts.push(b.durationMs)
    },
  })
  const seconds = (now() - t0) / 1000
  const elu = performance.eventLoopUtilization(elu0)
  const usage = process.cpuUsage(usage0)
  const switches = { before: switches0, after: await contextSwitches() }
  const main1 = await mainThreadMicros()
  const mainMicros = main0 !== undefined && main1 !== undefined ? main1 - main0 : undefined
  const allocated = await allocations?.()
  const cpuProfile = await profiler?.()
  const waited = await waits.stop()
  const share = await m.cpu.stop(cpuStart)
  return { result, seconds, elu, usage, switches, mainMicros, allocated, cpuProfile, waited, share, posts, timings: m.timings, t0 }
}

/** The measured drain's figures: rate, CPU shares and per event, threads, switches, profiles, statements, waits, POSTs. */
async function printProfile(d: Drained, dbName: string): Promise<void> {
  const { result, seconds, usage, share } = d
  const perEvent = (micros: number) => (micros / result.succeeded).toFixed(1)
  console.log(
    `batchSize ${batchSize}: ${result.succeeded} delivered in ${seconds.toFixed(2)} s = ${Math.round(result.succeeded / seconds)}/s, ${result.batches} batches`,
  )
  console.log(`CPU % of one core: bench ${share.bench}, receiver ${share.receiver}, postgres ${share.postgres}, machine ${share.machine}`)
  // All of this process's threads (GC helpers included), split by where the time went.
  console.log(
    `Dispatcher CPU per event: ${perEvent(usage.user + usage.system)} µs (user ${perEvent(usage.user)}, system ${perEvent(usage.system)})`,
  )
  if (d.mainMicros !== undefined) {
    const mainUs = d.mainMicros / result.succeeded
    console.log(
      `  of which the event loop thread ${mainUs.toFixed(1)} µs, other threads (GC helpers, libuv, the profiler) ${((usage.user + usage.system) / result.succeeded - mainUs).toFixed(1)} µs`,
    )
  }
  // Involuntary switches: the event loop's thread preempted, mostly by a process its own write woke
  // (the receiver, a Postgres backend) on the same core: the time shows up as socket writes.
  const { before, after } = d.switches
  if (before && after)
    console.log(
      `Event loop thread context switches per event: ${((after.voluntary - before.voluntary) / result.succeeded).toFixed(2)} voluntary, ${((after.involuntary - before.involuntary) / result.succeeded).toFixed(2)} involuntary (preempted)`,
    )
  // The dispatcher's event loop: busy running JavaScript (and callbacks), or idle waiting for I/O.
  console.log(
    `Dispatcher event loop busy ${Math.round(d.elu.utilization * 100)}% of the drain (idle = waiting for Postgres or the receiver)`,
  )
  if (d.cpuProfile) await summarize(d.cpuProfile)
  if (d.allocated) summarizeAllocations(d.allocated, result.succeeded)
  describe(d.timings, d.t0, seconds * 1000)
  const sorted = d.posts.sort((a, b) => a - b)
  console.log(`Sampled backends of ${dbName} every ~5 ms (${d.waited.samples} samples), active statements by wait event:`)
  for (const [k, v] of [...d.waited.counts].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(`  ${String(v).padStart(5)}  ${k}`)
  console.log(
    `POST ms (whole ms, as deliver() reports): p50 ${percentile(sorted, 0.5)} p90 ${percentile(sorted, 0.9)} p99 ${percentile(sorted, 0.99)}`,
  )
}

/** Samples pg_stat_activity until stopped: what the database's active statements are waiting on (CPU when nothing). */
function sampleWaits(admin: pg.Client, database: string) {
  const counts = new Map<string, number>()
  let samples = 0
  let stopping = false
  const loop = (async () => {
    while (!stopping) {
      const { rows } = await admin.query<{ w: string; q: string }>(
        `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, left(regexp_replace(query, '\\s+', ' ', 'g'), 30) AS q
         FROM pg_stat_activity WHERE datname = $1 AND state = 'active'`,
        [database],
      )
      samples++
      for (const r of rows) {
        const key = `${r.w.padEnd(28)} ${r.q.includes('WITH cfg') ? 'claim' : r.q.startsWith('WITH u AS') || r.q.startsWith('WITH ev AS') ? 'record' : r.q}`
        counts.set(key, (counts.get(key) ?? 0) + 1)
      }
      await new Promise(resolve => setTimeout(resolve, 5))
    }
  })()
  return {
    stop: async () => {
      stopping = true
      await loop
      return { samples, counts }
    },
  }
}

type ProfileNode = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
type CpuProfile = { nodes: ProfileNode[]; samples?: number[]; timeDeltas?: number[] }

/** Self time of the profiled drain by where the code lives, and the heaviest functions. */
async function summarize(profile: CpuProfile): Promise<void> {
  const byId = new Map(profile.nodes.map(n => [n.id, n]))
  const sourceOf = await bundleSources(profile)
  const self = new Map<number, number>()
  const samples = profile.samples ?? []
  samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas?.[i] ?? 0)))
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  const area = (n: ProfileNode) => {
    const { functionName: f } = n.callFrame
    const url = sourceOf(n)
    if (f.startsWith('(')) return f
    if (url.includes('/node_modules/')) return url.replace(/.*\/node_modules\/((@[^/]+\/)?[^/]+).*/, '$1')
    if (url.includes('/lib/')) return 'lib/ (Actions)'
    if (url.startsWith('node:')) return 'node: internals'
    return url === '' ? 'native' : 'other'
  }
  const areas = new Map<string, number>()
  const fns = new Map<string, number>()
  for (const [id, us] of self) {
    const n = byId.get(id)
    if (!n) continue
    areas.set(area(n), (areas.get(area(n)) ?? 0) + us)
    const name = `${n.callFrame.functionName || '(anonymous)'} ${sourceOf(n).replace(/.*\/(node_modules|lib)\//, '$1/')}`
    fns.set(name, (fns.get(name) ?? 0) + us)
  }
  const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)}%`
  console.log('V8 profile of the drain, self time by area (of the profiled wall time):')
  for (const [k, v] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(`  ${pct(v)}  ${k}`)
  console.log('Heaviest functions (self time):')
  for (const [k, v] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(v)}  ${k}`)
}

/**
 * The source file of a profiled function. A bundle's functions all report the bundle's URL; esbuild
 * writes a comment naming each module (`// lib/delivery/webhook.ts`) before its code, so a function's
 * module is the last such comment above its line. Other URLs are returned as they are.
 */
async function bundleSources(profile: CpuProfile): Promise<(n: ProfileNode) => string> {
  const modules = new Map<string, { line: number; path: string }[]>()
  for (const url of new Set(profile.nodes.map(n => n.callFrame.url))) {
    if (!url.includes('/.bench-build/')) continue
    const text = await readFile(new URL(url), 'utf8').catch(() => '')
    const marks: { line: number; path: string }[] = []
    text.split('\n').forEach((line, i) => {
      const m = /^\/\/ ((?:\.\.\/)*[\w@./-]+\.[cm]?[jt]s)$/.exec(line)
      if (m?.[1]) marks.push({ line: i, path: `/${m[1].replace(/^(\.\.\/)+/, '')}` })
    })
    modules.set(url, marks)
  }
  return n => {
    const marks = modules.get(n.callFrame.url)
    if (!marks) return n.callFrame.url
    let path = n.callFrame.url
    for (const mark of marks) {
      if (mark.line > n.callFrame.lineNumber) break
      path = mark.path
    }
    return path
  }
}

/** Starts the V8 profiler when PROFILE_CPU names an output file; the returned function stops it, writes the file and returns the profile. */
async function startProfiler(): Promise<(() => Promise<CpuProfile>) | undefined> {
  const file = process.env.PROFILE_CPU
  if (!file) return undefined
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.start')
  return async () => {
    const { profile } = await session.post('Profiler.stop')
    await writeFile(file, JSON.stringify(profile))
    session.disconnect()
    return profile
  }
}

/** The main thread's CPU time so far, µs (Linux: utime + stime of /proc/<pid>/task/<pid>/stat; undefined elsewhere). */
async function mainThreadMicros(): Promise<number | undefined> {
  const stat = await readFile(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8').catch(() => undefined)
  // Fields after the command name (which may hold spaces) start at field 3; utime and stime are fields 14 and 15.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields?.[11]) + Number(fields?.[12])
  return Number.isFinite(ticks) ? ticks * 10_000 : undefined
}

/** The main thread's context switches so far (Linux; undefined elsewhere). */
async function contextSwitches(): Promise<{ voluntary: number; involuntary: number } | undefined> {
  const status = await readFile(`/proc/${process.pid}/task/${process.pid}/status`, 'utf8').catch(() => undefined)
  const count = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)$`, 'm').exec(status ?? '')?.[1])
  const voluntary = count('voluntary_ctxt_switches')
  const involuntary = count('nonvoluntary_ctxt_switches')
  return Number.isFinite(voluntary) && Number.isFinite(involuntary) ? { voluntary, involuntary } : undefined
}

/** Starts sampling allocations when PROFILE_ALLOC=1 (objects the GC collected too); the returned function stops it. */
async function startAllocationSampling(): Promise<(() => Promise<HeapProfiler.SamplingHeapProfile>) | undefined> {
  if (process.env.PROFILE_ALLOC !== '1') return undefined
  const session = new Session()
  session.connect()
  await session.post('HeapProfiler.enable')
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  })
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling')
    session.disconnect()
    return profile
  }
}

/** Sampled bytes allocated per delivered event, in all and by allocating function (the heaviest 20). */
function summarizeAllocations(profile: HeapProfiler.SamplingHeapProfile, events: number): void {
  const bySite = new Map<string, number>()
  let total = 0
  const walk = (node: HeapProfiler.SamplingHeapProfileNode) => {
    const { functionName, url, lineNumber } = node.callFrame
    // Files tsx compiles report no line (0); node_modules' JavaScript does.
    const site = `${functionName || '(anonymous)'} ${url.replace(/.*\/(node_modules|lib)\//, '$1/')}${lineNumber > 0 ? `:${lineNumber + 1}` : ''}`
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
    total += node.selfSize
    for (const child of node.children) walk(child)
  }
  walk(profile.head)
  console.log(`Allocated per event (sampled): ${(total / events / 1024).toFixed(1)} KiB; heaviest allocating functions:`)
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 20)) {
    console.log(`  ${(bytes / events).toFixed(0).padStart(6)} B  ${site}`)
  }
}

/** Times every statement sent through the pool, classified by its text. */
function instrument(pool: pg.Pool, out: Timing[]): void {
  onEveryQuery(pool, (query, args) => {
    // Prepared statements come as a config object ({ name, text, values }), plain ones as text.
    const first = args[0]
    const text =
      typeof first === 'string'
        ? first
        : typeof first === 'object' && first !== null && 'text' in first && typeof first.text === 'string'
          ? first.text
          : ''
    const start = now()
    const done = (r: unknown) => {
      const rows = typeof r === 'object' && r !== null && 'rowCount' in r && typeof r.rowCount === 'number' ? r.rowCount : 0
      out.push({ kind: classify(text), start, ms: now() - start, rows })
    }
    // pool.query passes a callback (and gets no promise back); a checked-out client's callers await the promise.
    const last = args[args.length - 1]
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, r: unknown) => {
        done(r)
        Reflect.apply(last, undefined, [err, r])
      }
    }
    const result = query(...args)
    if (result instanceof Promise) void result.then(done, () => {})
    return result
  })
}

function classify(sql: string): string {
  if (sql === CLAIM_SQL) return 'claim'
  if (sql === RECORD_SQL || sql === RECORD_OK_SQL) return 'record'
  if (sql === RELEASE_SQL) return 'release'
  return 'other'
}

function describe(timings: Timing[], t0: number, totalMs: number): void {
  for (const kind of ['claim', 'record', 'release', 'other']) {
    const ts = timings.filter(t => t.kind === kind)
    if (!ts.length) continue
    const ms = ts.map(t => t.ms).sort((a, b) => a - b)
    const busy = ts.reduce((a, t) => a + t.ms, 0)
    console.log(
      `${kind}: ${ts.length} statements, ${(ts.reduce((a, t) => a + t.rows, 0) / ts.length).toFixed(1)} rows each, ` +
        `ms p50 ${percentile(ms, 0.5).toFixed(2)} p90 ${percentile(ms, 0.9).toFixed(2)} p99 ${percentile(ms, 0.99).toFixed(2)}, ` +
        `in flight ${Math.round((busy / totalMs) * 100)}% of the wall time`,
    )
    // Drift over the run: a claim that slows as the table's dead tuples pile up shows here.
    const tenths = Array.from({ length: 10 }, (_, i) => ts.filter(t => Math.min(9, Math.floor(((t.start - t0) / totalMs) * 10)) === i))
    console.log(
      `  ${kind} mean ms by tenth of the run: ${tenths.map(g => (g.length ? (g.reduce((a, t) => a + t.ms, 0) / g.length).toFixed(2) : '-')).join(' ')}`,
    )
    console.log(`  ${kind} statements by tenth of the run: ${tenths.map(g => g.length).join(' ')}`)
  }
}

main().then(
  () => process.exit(0),
  e => {
    console.error(e)
    process.exit(1)
  },
)

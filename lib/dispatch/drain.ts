import type { Context } from '@opentelemetry/api'
import type { AttemptRecord, RecordedRow } from '../db/record.js'
import { getSchemaAndVariables } from '../db/schemas.js'
import type { Deps } from '../deps.js'
import type { Logger } from '../log.js'
import type { ProjectMetrics } from '../metrics/registry.js'
import { ClaimQueue } from './claims.js'
import { countRecorded, deliverBatch, failedByClaim, retryAfterMs, type BatchReport, type Tally } from './outcomes.js'
import { recordSettings } from '../config.js'
import { targetHealthChanges } from './health.js'
import { emitOps, type OpsEvent } from '../ops.js'
import { leaveSignal, type DrainStop, type LeftSignal } from './leave-signal.js'
import { createRecorder } from './recorder.js'
import { resolveTargets, type ResolvedTarget } from './resolve.js'
import { tracedStatements } from '../tracing/sql.js'

export type DrainOptions = {
  /** Time left in this invocation; Lambda's `context.getRemainingTimeInMillis`. */
  remainingMs: () => number
  /** Called after each delivered batch (the local stack prints a line per batch). */
  onBatch?: (batch: BatchReport) => void
  /**
   * Stop claiming after this many milliseconds and leave a continuation signal, so other projects of
   * the invocation get their turn (drainProjects passes DISPATCH_PROJECT_SLICE_MS, shorter while other
   * projects wait); a function is asked at every turn. Unbounded when absent.
   */
  sliceMs?: number | (() => number)
  /** With tracing on: the drain's `actions.dispatch` span, parent of its webhook and statement spans. */
  trace?: Context
}

/**
 * A drain under way, in two steps: `yielded` once it claims nothing more and has handed its queued
 * claims back (its slice ended, or it is done), so another drain may take its place while requests
 * it sent are still in flight; `done` once those are recorded too and its signal is left.
 */
export type StartedDrain = { yielded: Promise<void>; done: Promise<DrainResult> }

export type DrainResult = Tally & {
  /** Why the drain stopped (nothing due, out of time, its slice used up), and the signal it left behind. */
  stop: DrainStop
  signal: LeftSignal
}

/** Holding more unwritten outcomes than this makes the drain wait for the recorder before claiming more. */
const MAX_UNRECORDED = 2_000

/** A drain under way: what its workers share. */
type Run = {
  deps: Deps
  project: string
  opts: DrainOptions
  log: Logger
  metrics: ProjectMetrics
  targets: ReadonlyMap<string, ResolvedTarget>
  claims: ClaimQueue
  recorder: ReturnType<typeof createRecorder>
  result: DrainResult
  startedAt: number
  /** Resolved when a delivery finishes: idle workers wait for it, as its outcome may make more work claimable. */
  deliveryDone: Deferred
  sliced: boolean
  /** The slice's end under way (claims handed back, the early signal): set once, when `sliced` is. */
  yielding?: Promise<void> | undefined
  /** Resolved when the drain gives up its place ({@link StartedDrain.yielded}). */
  yielded: Deferred
  /** Deliveries begun: a drain that yields with all of them in flight still moved work. */
  begun: number
  /** The signal left when the drain yielded with deliveries in flight (see {@link yieldPlace}). */
  earlySignal?: LeftSignal | undefined
  /** `resolved`: a record resolved an event of an ordering key since the last claim began, so the key's next event may be claimable. */
  keys: { resolved: boolean }
  ops: OpsEvent[]
  /** The claim idle workers wait on once everything delivered is being recorded ({@link reclaim}). */
  reclaim?: Promise<boolean> | undefined
  failure?: unknown
}

/** A drain's shared state before its claim queue and recorder exist. */
type RunBase = Omit<Run, 'claims' | 'recorder'>

/**
 * Delivers a project's due events until nothing is due, the invocation runs short of time, or its
 * slice is used up. DISPATCH_CONCURRENCY workers deliver batches side by side from a claim queue
 * (lib/dispatch/claims.ts: prefetch, byte budget, fair shares, lease ageing, release); outcomes are
 * recorded many per statement. Targets the drain cannot run are left alone (see resolveTargets), and
 * every other target proceeds. Leaves a continuation signal when it stops with work left, or one
 * delayed signal for the next retry due within 15 minutes.
 */
export async function drainProject(deps: Deps, project: string, opts: DrainOptions): Promise<DrainResult> {
  return startDrain(deps, project, opts).done
}

/**
 * {@link drainProject}, with the moment it gives up its place: when its slice ends, even while
 * requests it sent are in flight (a hanging receiver holds them up to its timeoutMs), so the caller
 * can start another project's drain then. Those requests finish and are recorded in the background;
 * `done` waits for them, and no claim is made after `yielded`.
 */
export function startDrain(deps: Deps, project: string, opts: DrainOptions): StartedDrain {
  const yielded = deferred()
  const done = runDrain(deps, project, opts, yielded).finally(() => yielded.resolve())
  return { yielded: yielded.promise, done }
}

async function runDrain(deps: Deps, project: string, opts: DrainOptions, yielded: Deferred): Promise<DrainResult> {
  const run = await startRun(deps, project, opts, yielded)
  // The slice ends on time even when every worker waits on a request that hangs: a timer, not only the next turn.
  const disarm = armSlice(run)
  try {
    await Promise.all(Array.from({ length: deps.config.DISPATCH_CONCURRENCY }, () => worker(run)))
    await run.claims.settled()
    if (run.yielding) await run.yielding
    if (run.failure ?? run.claims.error) throw run.failure ?? run.claims.error
  } finally {
    disarm()
    // A drain that ends (or fails) hands its unstarted claims back at once instead of leaving them to their leases.
    if (run.claims.queued > 0)
      await run.claims
        .stop()
        .catch(error => run.log.error('Could not release unstarted claims; they become due when their leases end', { error }))
    // Whatever was delivered is written, even when the drain stops on an error.
    await run.recorder.flush()
    await emitOps(deps, run.ops.splice(0))
  }
  const { result, claims } = run
  result.stop = run.sliced ? 'slice' : claims.leftForTime ? 'time' : 'idle'
  const progressed = result.batches > 0 || result.failedUnknownTarget > 0
  const held = heldTargets(run)
  if (run.earlySignal === undefined) {
    result.signal = await leaveSignal(deps, project, { stop: result.stop, progressed, held }, run.log)
  } else {
    // The continuation went out when the drain yielded; what its background deliveries recorded since
    // (a timeout's retry) gets the signal an idle drain leaves, for when it is due.
    result.signal = run.earlySignal
    await leaveSignal(deps, project, { stop: 'idle', progressed, held }, run.log)
  }
  return result
}

/** Targets whose events no signal can move: they are held back in this drain as broken. */
const heldTargets = (run: Run) => [...run.targets.values()].filter(t => t.heldBack === 'broken').map(t => t.name)

/** How often a slice that is used up looks again whether its drain has begun a delivery yet. */
const FIRST_DELIVERY_RECHECK_MS = 10

/** Milliseconds left of the drain's slice (infinite without one). */
function sliceLeft(run: Run): number {
  const slice = run.opts.sliceMs
  if (slice === undefined) return Number.POSITIVE_INFINITY
  return (typeof slice === 'number' ? slice : slice()) - (performance.now() - run.startedAt)
}

/** Ends the slice when it is used up, by a timer re-armed while the slice (asked again each time) still has time; returns its disarm. */
function armSlice(run: Run): () => void {
  let timer: NodeJS.Timeout | undefined
  const check = () => {
    const left = sliceLeft(run)
    if (run.sliced || left === Number.POSITIVE_INFINITY) return
    if (left > 0) timer = setTimeout(check, left)
    // A slice never ends before its first delivery began (a slow claim must not make a drain yield with nothing done).
    else if (run.begun === 0) timer = setTimeout(check, FIRST_DELIVERY_RECHECK_MS)
    else
      endSlice(run).catch(e => {
        run.failure ??= e
      })
  }
  check()
  return () => clearTimeout(timer)
}

/**
 * The slice is used up: queued claims go back, no claim follows, and the drain gives up its place.
 * Deliveries under way finish in the background. Idempotent: the timer and a worker's turn may both get here.
 */
function endSlice(run: Run): Promise<void> {
  if (!run.sliced) {
    run.sliced = true
    run.yielding = run.claims.stop().then(() => yieldPlace(run))
  }
  return run.yielding ?? Promise.resolve()
}

/**
 * Gives up the drain's place. With deliveries still in flight it leaves the continuation signal now,
 * not when they end: another invocation may then drain the project's other targets (the claimed
 * events stay leased to this drain, so nothing is sent twice) instead of waiting for a slow receiver.
 */
async function yieldPlace(run: Run): Promise<void> {
  if (run.claims.delivering > 0) {
    const progressed = run.begun > 0 || run.result.failedUnknownTarget > 0
    run.earlySignal = await leaveSignal(run.deps, run.project, { stop: 'slice', progressed, held: heldTargets(run) }, run.log)
  }
  run.yielded.resolve()
}

/** Reads the project's schema and variables, resolves its targets once, and sets up the claim queue and the recorder. */
async function startRun(deps: Deps, project: string, opts: DrainOptions, yielded: Deferred): Promise<Run> {
  const log = deps.log.child({ project })
  const metrics = deps.metrics.forProject(project)
  const { stored, variables } = await getSchemaAndVariables(deps.db, project)
  const targets = resolveTargets({
    // By key: a target's `name` may differ from it, and events name their target by key.
    targets: Object.entries(stored?.schema.targets ?? {}).map(([key, t]) => (t.name === key ? t : { ...t, name: key })),
    variables,
    config: deps.config,
    remainingMs: opts.remainingMs(),
    log,
    metrics,
  })
  const result: DrainResult = {
    succeeded: 0,
    retried: 0,
    failedAfterAttempt: 0,
    failedUnknownTarget: 0,
    batches: 0,
    stop: 'idle',
    signal: 'none',
  }
  // `ops`: operational events of this drain (lib/ops.ts), enqueued into OPS_PROJECT when it ends.
  const shared: RunBase = {
    deps,
    project,
    opts,
    log,
    metrics,
    targets,
    result,
    startedAt: performance.now(),
    deliveryDone: deferred(),
    sliced: false,
    yielded,
    begun: 0,
    keys: { resolved: false },
    ops: [],
  }
  // The recorder calls back only for outcomes added by a worker, once `run` exists.
  // OTEL_ACTIONS_SQL: the claim's and the record's statements get a span each (lib/tracing/sql.ts).
  const db = deps.tracing.sql ? tracedStatements(deps.db, deps.tracing, opts.trace) : deps.db
  const recorder = createRecorder(db, (rows, records) => afterRecord(run, rows, records), log, recordSettings(deps.config))
  const run: Run = { ...shared, recorder, claims: claimQueue(shared, recorder, db) }
  return run
}

/** The drain's claim queue: its workers' share of the invocation's time, and the recorder catching up before each claim. */
function claimQueue(base: RunBase, recorder: Run['recorder'], db: Deps['db']): ClaimQueue {
  // `base` is a copy of the run's fields: only its objects (keys, result) are shared with the run.
  const { deps, opts } = base
  const claims: ClaimQueue = new ClaimQueue({
    db,
    project: base.project,
    targets: base.targets,
    concurrency: deps.config.DISPATCH_CONCURRENCY,
    maxClaimedBytes: deps.config.DISPATCH_MAX_CLAIMED_BYTES,
    fits: t => opts.remainingMs() >= t.timeoutMs + deps.config.DISPATCH_TIME_MARGIN_MS,
    // With nothing in flight the claim waits for the last outcomes to be written: they may have
    // resolved the head of an ordering key, making its next event claimable by this very claim.
    beforeClaim: async () => {
      if (recorder.backlog() > MAX_UNRECORDED || claims.delivering === 0) await recorder.flush()
      base.keys.resolved = false
    },
    onClaimFailures: claimed => failedByClaim(claimed, base.result, base.metrics, base.log),
  })
  return claims
}

/** What written outcomes change: the tally, resolved ordering keys, capped targets' slots, and paused or resumed targets. */
function afterRecord(run: Run, rows: RecordedRow[], records: ReadonlyMap<string, AttemptRecord>): void {
  const { claims, log, project } = run
  countRecorded(rows, records, run.result, run.metrics, log)
  if (rows.some(r => r.keyed && r.state !== 'retrying')) run.keys.resolved = true
  claims.recorded(rows)
  const changes = targetHealthChanges(rows, log)
  for (const [paused, reason] of changes.paused) {
    void claims
      .releaseTarget(paused)
      .catch(error =>
        log.error('Could not release the claims of a paused target; they become due when their leases end', { target: paused, error }),
      )
    run.ops.push({ kind: reason === 'failures' ? 'target.paused' : 'target.needs_operator', project, target: paused })
  }
  for (const resumed of changes.resumed) run.ops.push({ kind: 'target.resumed', project, target: resumed })
}

/** One of the drain's workers: takes turns until the drain is done or has failed. */
async function worker(run: Run): Promise<void> {
  try {
    while (!run.failure && (await turn(run))) {
      /* next batch */
    }
  } catch (e) {
    run.failure ??= e
  }
  announceDeliveryDone(run)
}

/**
 * Delivers one batch, or waits for a delivery under way to finish (its outcome may make more work
 * claimable: a quick retry, an event released elsewhere). False when the drain is done: nothing is
 * queued or claimable, and no worker is delivering.
 */
async function turn(run: Run): Promise<boolean> {
  // The slice is used up: queued claims go back, deliveries under way finish, a continuation follows.
  if (run.sliced || (run.begun > 0 && sliceLeft(run) <= 0)) await endSlice(run)
  const next = await run.claims.next()
  if (next === 'again') return true
  if (next === 'empty') {
    if (run.claims.delivering === 0) {
      // Before the drain ends: a key's next event, or a capped target's next batch, may be claimable
      // soon ({@link reclaim}). Every idle worker waits on the one attempt, so all go on if it brings work.
      run.reclaim ??= reclaim(run).finally(() => {
        run.reclaim = undefined
      })
      return run.reclaim
    }
    await run.deliveryDone.promise
    return true
  }
  try {
    // A rate-capped target's requests start one interval apart (lib/db/flow.ts), whichever drain sends them.
    const wait = (next.startAt ?? 0) - performance.now()
    if (wait > 0) await sleep(wait)
    run.begun++
    const records = await deliverBatch({
      deps: run.deps,
      project: run.project,
      claimed: next,
      log: run.log,
      metrics: run.metrics,
      onBatch: run.opts.onBatch,
      trace: run.opts.trace,
    })
    // "Slow down" holds the whole target here at once (set before any await: no other worker sends to
    // it meanwhile); the record holds it for every other drain.
    const hold = retryAfterMs(records, run.deps.config.RETRY_AFTER_MAX_MS)
    const holding = hold === undefined ? undefined : run.claims.holdTarget(next.target.name, hold)
    // A target with maxInFlight gets its slot back when the outcome is written: no lingering for it.
    run.recorder.add(records, next.target.maxInFlight !== undefined)
    run.result.batches++
    await holding
  } finally {
    run.claims.finished(next)
    announceDeliveryDone(run)
  }
  return true
}

/**
 * What an otherwise idle drain does before it ends. The last outcomes may resolve the head of an
 * ordering key whose next event is due: writes them now (the drain's end would anyway) and claims once
 * more rather than leave that event to a signal; never again unless a record resolved a keyed event
 * since. A target its caps cut has more due: waits until they allow a batch (while the invocation's
 * time does) and claims for it. True when the drain should go on.
 */
async function reclaim(run: Run): Promise<boolean> {
  if (run.recorder.backlog() > 0) await run.recorder.flush()
  if (run.sliced) return false
  const capMs = run.claims.nextCapMs()
  if (capMs !== undefined) {
    // A capped target has more due: wait until its caps let it take another batch, while time allows.
    const ms = Math.min(capMs, CAP_WAIT_MAX_MS)
    if (run.opts.remainingMs() - ms < run.deps.config.DISPATCH_TIME_MARGIN_MS) return false
    await sleep(ms)
    await run.claims.claimAgain()
    return true
  }
  if (!run.keys.resolved) return false
  run.keys.resolved = false
  return run.claims.claimAgain()
}

/** The longest an otherwise idle drain sleeps at a time for a capped target; it looks again after. */
const CAP_WAIT_MAX_MS = 1_000

const sleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/** Wakes every worker waiting for a delivery to finish. */
function announceDeliveryDone(run: Run): void {
  run.deliveryDone.resolve()
  run.deliveryDone = deferred()
}

type Deferred = { promise: Promise<void>; resolve: () => void }

/** A promise with its resolver (Promise.withResolvers needs Node 22). */
function deferred(): Deferred {
  let resolve = () => {}
  const promise = new Promise<void>(r => {
    resolve = r
  })
  return { promise, resolve }
}

import { claimBatches, type ClaimedBatch, type TargetClaimConfig } from '../db/claim.js'
import { hasDueEvents, msUntilNextDue } from '../db/due.js'
import type { EventRow } from '../db/events.js'
import { releaseClaims, type AttemptRecord, type RecordedRow } from '../db/record.js'
import { getCurrentSchema } from '../db/schemas.js'
import { fetchVariables } from '../db/variables.js'
import type { Outcome } from '../delivery/response.js'
import { addressTarget, deliver, type Address } from '../delivery/webhook.js'
import type { Deps } from '../deps.js'
import type { Logger } from '../log.js'
import type { ProjectMetrics } from '../metrics.js'
import { MAX_DELAY_SECONDS } from '../signals.js'
import { TARGET_DEFAULTS, type WebhookTarget } from '../schema/actions.js'
import { targetProblems } from '../schema/limits.js'
import { recordSettings } from '../config.js'
import { reportTargetHealth } from './health.js'
import { createRecorder } from './recorder.js'

export type DrainOptions = {
  /** Time left in this invocation; Lambda's `context.getRemainingTimeInMillis`. */
  remainingMs: () => number
  /** Called after each delivered batch (the local stack prints a line per batch). */
  onBatch?: (batch: { project: string; target: string; events: number; succeeded: number; durationMs: number }) => void
}

export type DrainResult = {
  succeeded: number
  retried: number
  failedAfterAttempt: number
  failedUnknownTarget: number
  batches: number
  /** Why the drain stopped, and the signal it left behind. */
  stop: 'idle' | 'time'
  signal: 'none' | 'continue' | { delaySeconds: number }
}

/** Holding more unwritten outcomes than this makes the drain wait for the recorder before claiming more. */
const MAX_UNRECORDED = 2_000
/** Events claimed ahead of the workers (at least two batches per worker). */
const PREFETCH_EVENTS = 256
/**
 * Delay of the signal left by a drain that stopped for time without moving anything: an immediate one
 * would start the same fruitless drain again at once, forever (a target no invocation can hold). Short,
 * because the usual cause is an invocation that reached this project late and a fresh one will fit.
 */
const NO_PROGRESS_DELAY_SECONDS = 5

type Claimed = { batch: ClaimedBatch; target: WebhookTarget; claimedAt: number }

const timeoutOf = (t: WebhookTarget) => t.timeoutMs ?? TARGET_DEFAULTS.timeoutMs

/**
 * Delivers a project's due events until nothing is due or the invocation runs short of time.
 * DISPATCH_CONCURRENCY workers deliver batches side by side from a small queue of claimed batches,
 * which one claim statement at a time refills ahead of need, within DISPATCH_MAX_CLAIMED_BYTES of
 * payload; outcomes are recorded many per statement. Targets the drain cannot run (see
 * {@link holdBack}) are left alone, and every other target proceeds. Leaves a continuation signal
 * when it stops for time with work left, or one delayed signal for the next retry due within 15 minutes.
 */
export async function drainProject(deps: Deps, project: string, opts: DrainOptions): Promise<DrainResult> {
  const log = deps.log.child({ project })
  const metrics = deps.metrics.forProject(project)
  const [stored, variables] = await Promise.all([getCurrentSchema(deps.db, project), fetchVariables(deps.db, project)])
  const targets = new Map(Object.values(stored?.schema.targets ?? {}).map(t => [t.name, t]))
  const held = holdBack([...targets.values()], deps.config, opts.remainingMs(), log, metrics)
  const margin = deps.config.DISPATCH_TIME_MARGIN_MS
  const fits = (t: WebhookTarget) => opts.remainingMs() >= timeoutOf(t) + margin
  const leaseOf = (t: WebhookTarget) => timeoutOf(t) + deps.config.LEASE_MARGIN_MS
  const runnable = [...targets.values()].filter(t => !held.broken.has(t.name) && !held.tooSlow.has(t.name))
  const claimConfigOf = (t: WebhookTarget): TargetClaimConfig => ({ name: t.name, batchSize: t.batchSize ?? TARGET_DEFAULTS.batchSize, leaseMs: leaseOf(t) })
  // Variables are read once per drain, so each target's URL and headers are resolved once too.
  const addresses = new Map<string, Address>()
  const addressOf = (t: WebhookTarget): Address => {
    let a = addresses.get(t.name)
    if (!a) addresses.set(t.name, a = addressTarget(t, variables))
    return a
  }
  const result: DrainResult = { succeeded: 0, retried: 0, failedAfterAttempt: 0, failedUnknownTarget: 0, batches: 0, stop: 'idle', signal: 'none' }

  const recorder = createRecorder(deps.db, (rows, records) => {
    countRecorded(rows, records, result, metrics, log)
    // A target the breaker just paused: its queued claims go back unattempted (only probes reach it now).
    for (const paused of reportTargetHealth(rows, log)) void release(takeQueued(c => c.batch.target === paused)).catch(e => { failure ??= e })
  }, log, recordSettings(deps.config))
  const concurrency = deps.config.DISPATCH_CONCURRENCY
  // Claimed ahead so a worker never waits for a claim round trip: a few hundred events, at least two
  // batches per worker. Leases are checked again before each delivery, so depth cannot outlive them.
  const maxBatchSize = Math.max(1, ...runnable.map(t => claimConfigOf(t).batchSize))
  const prefetch = Math.max(2 * concurrency, Math.ceil(PREFETCH_EVENTS / maxBatchSize))
  const queue: Claimed[] = []
  const bytes = createByteBudget(deps.config.DISPATCH_MAX_CLAIMED_BYTES)
  let claiming: Promise<void> | undefined
  let exhausted = false
  // Counts events that may have become claimable (a delivery finished, claims went back): a claim that
  // ran meanwhile may have missed them, so it cannot call the project exhausted.
  let changes = 0
  const changed = () => {
    changes++
    exhausted = false
  }
  // Some target's events were left because its timeout no longer fits: the drain stops for time.
  let leftForTime = held.tooSlow.size > 0
  let outOfTime = false
  let failure: unknown

  const refill = (): Promise<void> | undefined => {
    if (claiming || exhausted || outOfTime || failure) return claiming
    claiming = (async () => {
      const ready = runnable.filter(fits)
      if (ready.length < runnable.length) leftForTime = true
      if (ready.length === 0) {
        outOfTime = true
        return
      }
      if (recorder.backlog() > MAX_UNRECORDED) await recorder.flush()
      const want = Math.min(prefetch - queue.length, bytes.batchesThatFit())
      if (want <= 0) {
        // The budget is spent on claims queued or in flight; a finished delivery frees it and wakes the claim.
        exhausted = true
        return
      }
      // Events of held and too slow targets wait; only a target missing from the schema fails.
      const waiting = [...targets.keys()].filter(name => !ready.some(t => t.name === name))
      const changesBefore = changes
      const claimed = await claimBatches(deps.db, project, ready.map(claimConfigOf), want, {
        waiting, budgetBytes: bytes.left(), atLeastOne: bytes.held() === 0,
      })
      const claimedAt = performance.now()
      failUnknown(claimed.unknownTarget, result, metrics, log)
      bytes.claimed(claimed.batches)
      for (const batch of claimed.batches) {
        const target = targets.get(batch.target)
        if (target) queue.push({ batch, target, claimedAt })
      }
      // Fewer batches than asked means nothing else is claimable right now (or the budget is spent).
      exhausted = claimed.batches.length < want && claimed.unknownTarget.length === 0 && changes === changesBefore
    })().catch(e => { failure ??= e }).finally(() => { claiming = undefined })
    return claiming
  }

  /** Hands claims back without an attempt; their bytes are free at once, their events claimable once released. */
  const release = async (claims: Claimed[]) => {
    for (const c of claims) bytes.freed(c.batch)
    await releaseClaims(deps.db, claims.flatMap(c => c.batch.events.map(e => ({ id: e.id, lease: e.visible_at }))))
    changed()
  }
  /** Removes and returns the queued claims that match. */
  const takeQueued = (matches: (c: Claimed) => boolean): Claimed[] => {
    const taken = queue.filter(matches)
    for (const c of taken) queue.splice(queue.indexOf(c), 1)
    return taken
  }

  // Workers with nothing to do wait for one that is delivering: its outcome may make more work
  // claimable (a quick retry, an event released elsewhere). The drain ends when all are idle.
  let delivering = 0
  let wake = signal()
  const notify = () => {
    wake.resolve()
    wake = signal()
  }

  const deliverNext = async (): Promise<boolean> => {
    if (queue.length <= prefetch / 2) void refill()
    const next = queue.shift()
    if (!next) {
      const pending = claiming ?? refill()
      if (pending) {
        await pending
        return true
      }
      if (delivering === 0) {
        notify()
        return false
      }
      await wake.promise
      return true
    }
    if (!fits(next.target)) {
      // Out of time for this target: its queued claims go back at once, due now, for the continuation;
      // faster targets go on.
      leftForTime = true
      await release([next, ...takeQueued(c => !fits(c.target))])
      return true
    }
    const unsafe = (c: Claimed) => performance.now() - c.claimedAt + timeoutOf(c.target) > leaseOf(c.target)
    if (unsafe(next)) {
      // Its lease could run out mid-delivery, letting another dispatcher take the events too; claims
      // queued behind a slow target age together, so all that are as old go back in one statement.
      await release([next, ...takeQueued(unsafe)])
      return true
    }
    delivering++
    try {
      recorder.add(await deliverBatch(deps, metrics, project, next.batch, next.target, addressOf(next.target), log, opts))
      result.batches++
    } finally {
      delivering--
      bytes.freed(next.batch)
      // Something finished: events retried soon or released by others may be claimable again.
      changed()
      notify()
    }
    return true
  }
  const worker = async () => {
    try {
      while (!failure && await deliverNext()) { /* next batch */ }
    } catch (e) {
      failure ??= e
    }
    notify()
  }

  try {
    await Promise.all(Array.from({ length: concurrency }, worker))
    await claiming
    if (failure) throw failure
  } finally {
    // A drain that fails hands its unstarted claims back at once instead of leaving them to their leases.
    if (queue.length > 0) await release(queue.splice(0)).catch(error => log.error('Could not release unstarted claims; they become due when their leases end', { error }))
    // Whatever was delivered is written, even when the drain stops on an error.
    await recorder.flush()
  }
  if (leftForTime) result.stop = 'time'
  const progressed = result.batches > 0 || result.failedUnknownTarget > 0
  result.signal = await leaveSignal(deps, project, result.stop, progressed, [...held.broken.keys()], log)
  return result
}

/** Targets a drain leaves alone, and why: each is warned once and counted. */
type Held = { broken: Map<string, string[]>; tooSlow: Set<string> }

/**
 * Checks each target of the stored schema once per drain. A schema stored before a limit existed (or
 * under a larger MAX_TARGET_TIMEOUT_MS) is `broken` until fixed: running it could overflow the record
 * statement or reach Object.prototype. A target slower than the time left is `tooSlow` for this
 * invocation only. Either way its events wait untouched (not claimed, attempts unchanged).
 */
function holdBack(targets: readonly WebhookTarget[], config: Deps['config'], remainingMs: number, log: Logger, metrics: ProjectMetrics): Held {
  const held: Held = { broken: new Map(), tooSlow: new Set() }
  for (const target of targets) {
    const problems = targetProblems(target, { maxTimeoutMs: config.MAX_TARGET_TIMEOUT_MS })
    if (problems.length > 0) held.broken.set(target.name, problems)
    else if (timeoutOf(target) + config.DISPATCH_TIME_MARGIN_MS > remainingMs) held.tooSlow.add(target.name)
    else continue
    log.warn('Target held back: its events wait, unclaimed', {
      target: target.name,
      problems: problems.length > 0 ? problems : [`timeoutMs: ${timeoutOf(target)} ms does not fit the ${Math.floor(remainingMs)} ms left in this invocation`],
    })
  }
  metrics.targetsHeld(held.broken.size + held.tooSlow.size)
  return held
}

/** Payload bytes held in claimed events (queued and in flight) against DISPATCH_MAX_CLAIMED_BYTES. */
function createByteBudget(max: number) {
  let held = 0
  // Mean bytes of the batches last claimed: the next claim asks only for what the budget left can
  // hold, so its candidate window (payloads Postgres reads to measure) stays near what it takes.
  let perBatch = 0
  return {
    held: () => held,
    left: () => Math.max(0, max - held),
    /** Batches worth asking for: at least one while nothing is held, so an oversized batch still moves. */
    batchesThatFit(): number {
      const room = perBatch > 0 ? Math.floor((max - held) / perBatch) : Number.POSITIVE_INFINITY
      return held === 0 ? Math.max(1, room) : room
    },
    claimed(batches: readonly ClaimedBatch[]): void {
      const sum = batches.reduce((n, b) => n + b.bytes, 0)
      held += sum
      if (batches.length > 0) perBatch = sum / batches.length
    },
    freed(batch: ClaimedBatch): void {
      held -= batch.bytes
    },
  }
}

/** A promise with its resolver (Promise.withResolvers needs Node 22). */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {}
  const promise = new Promise<void>(r => { resolve = r })
  return { promise, resolve }
}

async function deliverBatch(deps: Deps, metrics: ProjectMetrics, project: string, batch: ClaimedBatch, target: WebhookTarget, address: Address, log: Logger, opts: DrainOptions): Promise<AttemptRecord[]> {
  let outcomes: Map<string, Outcome>
  let durationMs = 0
  try {
    const delivery = await deliver(deps.http, target, address, batch.events, log)
    outcomes = delivery.outcomes
    durationMs = delivery.durationMs
    metrics.deliveryDuration(durationMs / 1000)
  } catch (error) {
    // A bug, not target trouble: the attempt still counts, as upstream does, so the event cannot loop forever.
    log.error('Delivery failed with an internal error', { target: target.name, error })
    outcomes = new Map(batch.events.map(e => [e.id, { ok: false, errorMessage: 'Internal error' }]))
  }
  const records = batch.events.map((e: EventRow): AttemptRecord => ({
    id: e.id,
    lease: e.visible_at,
    project, target: target.name, attempts: e.num_retries,
    outcome: outcomes.get(e.id) ?? { ok: false, errorMessage: 'Internal error' },
    durationMs,
    maxAttempts: target.maxAttempts ?? TARGET_DEFAULTS.maxAttempts,
    initialRepeatIntervalMs: target.initialRepeatIntervalMs ?? TARGET_DEFAULTS.initialRepeatIntervalMs,
  }))
  opts.onBatch?.({ project, target: target.name, events: records.length, succeeded: records.filter(r => r.outcome.ok).length, durationMs })
  return records
}

function countRecorded(rows: RecordedRow[], records: ReadonlyMap<string, AttemptRecord>, result: DrainResult, metrics: ProjectMetrics, log: Logger): void {
  let succeeded = 0
  let retried = 0
  let failed = 0
  for (const row of rows) {
    if (row.state === 'succeed') succeeded++
    else if (row.state === 'retrying') retried++
    else {
      failed++
      const outcome = records.get(row.id)?.outcome
      log.error('Action event failed permanently, no attempts left', {
        eventId: row.id, target: row.target, trigger: row.trigger, attempts: row.num_retries,
        code: outcome && !outcome.ok ? outcome.code : undefined,
        errorMessage: outcome && !outcome.ok ? outcome.errorMessage : undefined,
      })
    }
  }
  result.succeeded += succeeded
  result.retried += retried
  result.failedAfterAttempt += failed
  metrics.succeeded(succeeded)
  metrics.deliveryAttemptFailed(retried + failed)
  metrics.failed(failed)
}

function failUnknown(rows: EventRow[], result: DrainResult, metrics: ProjectMetrics, log: Logger): void {
  for (const row of rows) {
    // Never retried: the schema has to name the target again before such an event can be delivered.
    log.error('Action event failed permanently, its target is not in the schema', { eventId: row.id, target: row.target, trigger: row.trigger })
  }
  result.failedUnknownTarget += rows.length
  metrics.failed(rows.length)
}

/**
 * The signal that keeps the project moving after this drain; a failure to send is logged, the sweeper
 * covers it. Events of `held` targets are not work a signal could move. A drain that moved nothing
 * never asks for an immediate successor.
 */
async function leaveSignal(deps: Deps, project: string, stop: DrainResult['stop'], progressed: boolean, held: readonly string[], log: Logger): Promise<DrainResult['signal']> {
  try {
    if (stop === 'time') {
      if (!(await hasDueEvents(deps.db, project, held))) return 'none'
      if (!progressed) {
        await deps.signals.send(project, NO_PROGRESS_DELAY_SECONDS)
        return { delaySeconds: NO_PROGRESS_DELAY_SECONDS }
      }
      await deps.signals.send(project)
      return 'continue'
    }
    const ms = await msUntilNextDue(deps.db, project, held)
    if (ms === undefined || ms > MAX_DELAY_SECONDS * 1000) return 'none'
    // At least a second: an event due now but claimed elsewhere must not start a hot loop of wake-ups.
    const delaySeconds = Math.max(1, Math.ceil(ms / 1000))
    await deps.signals.send(project, delaySeconds)
    return { delaySeconds }
  } catch (error) {
    log.error('Could not leave a signal for the rest of the work; the sweeper will pick it up', { error })
    return 'none'
  }
}

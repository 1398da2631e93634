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

type Claimed = { batch: ClaimedBatch; target: WebhookTarget; claimedAt: number }

const timeoutOf = (t: WebhookTarget) => t.timeoutMs ?? TARGET_DEFAULTS.timeoutMs

/**
 * Delivers a project's due events until nothing is due or the invocation runs short of time.
 * DISPATCH_CONCURRENCY workers deliver batches side by side from a small queue of claimed batches,
 * which one claim statement at a time refills ahead of need; outcomes are recorded many per
 * statement. Leaves a continuation signal when it stops for time with work left, or one delayed
 * signal for the next retry due within 15 minutes.
 */
export async function drainProject(deps: Deps, project: string, opts: DrainOptions): Promise<DrainResult> {
  const log = deps.log.child({ project })
  const metrics = deps.metrics.forProject(project)
  const [stored, variables] = await Promise.all([getCurrentSchema(deps.db, project), fetchVariables(deps.db, project)])
  const targets = new Map(Object.values(stored?.schema.targets ?? {}).map(t => [t.name, t]))
  const leaseOf = (t: WebhookTarget) => timeoutOf(t) + deps.config.LEASE_MARGIN_MS
  const claimConfig: TargetClaimConfig[] = [...targets.values()].map(t => ({ name: t.name, batchSize: t.batchSize ?? TARGET_DEFAULTS.batchSize, leaseMs: leaseOf(t) }))
  // The next batch could go to any target, so the slowest one decides whether another fits in the time left.
  const neededMs = Math.max(0, ...[...targets.values()].map(timeoutOf)) + deps.config.DISPATCH_TIME_MARGIN_MS
  // Variables are read once per drain, so each target's URL and headers are resolved once too.
  const addresses = new Map<string, Address>()
  const addressOf = (t: WebhookTarget): Address => {
    let a = addresses.get(t.name)
    if (!a) addresses.set(t.name, a = addressTarget(t, variables))
    return a
  }
  const result: DrainResult = { succeeded: 0, retried: 0, failedAfterAttempt: 0, failedUnknownTarget: 0, batches: 0, stop: 'idle', signal: 'none' }

  const recorder = createRecorder(deps.db, (rows, records) => countRecorded(rows, records, result, metrics, log), log)
  const concurrency = deps.config.DISPATCH_CONCURRENCY
  // Claimed ahead so a worker never waits for a claim round trip: a few hundred events, at least two
  // batches per worker. Leases are checked again before each delivery, so depth cannot outlive them.
  const maxBatchSize = Math.max(1, ...claimConfig.map(t => t.batchSize))
  const prefetch = Math.max(2 * concurrency, Math.ceil(PREFETCH_EVENTS / maxBatchSize))
  const queue: Claimed[] = []
  let claiming: Promise<void> | undefined
  let exhausted = false
  let failure: unknown

  const refill = (): Promise<void> | undefined => {
    if (claiming || exhausted || result.stop === 'time' || failure) return claiming
    claiming = (async () => {
      if (opts.remainingMs() < neededMs) {
        result.stop = 'time'
        return
      }
      if (recorder.backlog() > MAX_UNRECORDED) await recorder.flush()
      const want = prefetch - queue.length
      const claimed = await claimBatches(deps.db, project, claimConfig, want)
      const claimedAt = performance.now()
      failUnknown(claimed.unknownTarget, result, metrics, log)
      for (const batch of claimed.batches) {
        const target = targets.get(batch.target)
        if (target) queue.push({ batch, target, claimedAt })
      }
      // Fewer batches than asked means nothing else is claimable right now.
      exhausted = claimed.batches.length < want && claimed.unknownTarget.length === 0
    })().catch(e => { failure ??= e }).finally(() => { claiming = undefined })
    return claiming
  }

  const release = (claims: Claimed[]) =>
    releaseClaims(deps.db, claims.flatMap(c => c.batch.events.map(e => ({ id: e.id, lease: e.visible_at }))))

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
    if (opts.remainingMs() < timeoutOf(next.target) + deps.config.DISPATCH_TIME_MARGIN_MS) {
      // Out of time: hand every claim still queued back at once, due now, for the continuation.
      result.stop = 'time'
      await release([next, ...queue.splice(0)])
      return true
    }
    const unsafe = (c: Claimed) => performance.now() - c.claimedAt + timeoutOf(c.target) > leaseOf(c.target)
    if (unsafe(next)) {
      // Its lease could run out mid-delivery, letting another dispatcher take the events too; claims
      // queued behind a slow target age together, so all that are as old go back in one statement.
      const aged = queue.filter(unsafe)
      for (const c of aged) queue.splice(queue.indexOf(c), 1)
      await release([next, ...aged])
      return true
    }
    delivering++
    try {
      recorder.add(await deliverBatch(deps, metrics, project, next.batch, next.target, addressOf(next.target), log, opts))
      result.batches++
    } finally {
      delivering--
      // Something finished: events retried soon or released by others may be claimable again.
      exhausted = false
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
    // Whatever was delivered is written, even when the drain stops on an error.
    await recorder.flush()
  }
  result.signal = await leaveSignal(deps, project, result.stop, log)
  return result
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

/** The signal that keeps the project moving after this drain; a failure to send is logged, the sweeper covers it. */
async function leaveSignal(deps: Deps, project: string, stop: DrainResult['stop'], log: Logger): Promise<DrainResult['signal']> {
  try {
    if (stop === 'time') {
      if (!(await hasDueEvents(deps.db, project))) return 'none'
      await deps.signals.send(project)
      return 'continue'
    }
    const ms = await msUntilNextDue(deps.db, project)
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

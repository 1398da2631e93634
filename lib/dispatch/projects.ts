import type { Deps } from '../deps.js'
import { SpanKind } from '@opentelemetry/api'
import { spanIds } from '../tracing/tracing.js'
import { startDrain, type DrainOptions, type DrainResult, type StartedDrain } from './drain.js'
import { serveTakenSignals, type DrainOutcome, type YieldingDrains } from './take-signals.js'

export { parseSignal } from './signal-body.js'

/**
 * How soon every project of an invocation should have started delivering, whatever the pool allows
 * in parallel and whatever its receivers do: while projects wait for a place, the drains running
 * shorten their slices so that the places pass on within this, and a drain gives up its place when
 * its slice ends even with requests in flight (a pool of 3 runs one drain at a time; three small
 * projects behind a deep one waited a whole 5 s slice, and a healthy project behind three whose
 * receivers hang waited for their timeouts).
 */
export const FAIR_START_MS = 1_000
/**
 * The part of FAIR_START_MS the slices are planned to hand every place on within: the rest is left
 * for the last drain's schema read, its claim and its first request.
 */
export const FAIR_PLAN_MS = 750
/** The shortest slice a drain gets while others wait: it still delivers something before it yields. */
export const MIN_SLICE_MS = 100
/**
 * Drains that gave up their place with requests still in flight, at most, before the next project
 * waits for one of them to end. Each holds only its in-flight batches (its queued claims went back)
 * and no database connection until its outcomes are written. Ten is the most projects a signal batch
 * names (the event source's batchSize; the local stack's poller takes at most ten too), so a batch is
 * never held back by its own hanging receivers; a larger batch is still bounded by it.
 */
export const MAX_YIELDED_DRAINS = 10

/**
 * Drains each distinct project once, a few at a time, each for at most DISPATCH_PROJECT_SLICE_MS of
 * claiming, less while other projects wait for a place (FAIR_START_MS): a project with more work, or
 * with requests still in flight, yields its place with a continuation signal, so every project named
 * in the batch starts within a second, however deep another's backlog and however slow its receivers.
 * Returns only once every drain's requests are answered (or timed out) and recorded: a Lambda frozen
 * after its handler returns must not hold a request in flight. Returns the error of every project
 * whose drain threw (logged and counted as a crash here); the caller has its signals redelivered.
 */
export async function drainProjects(deps: Deps, projects: readonly string[], opts: DrainOptions): Promise<Map<string, unknown>> {
  // Each drain holds up to three connections at once (claim, record, release); more drains than the
  // pool can serve would wait on it and time out, so they run a few at a time.
  const parallel = Math.max(1, Math.floor(deps.config.DB_POOL_MAX / 3))
  const configured = deps.config.DISPATCH_PROJECT_SLICE_MS
  const queue = limiter([...new Set(projects)], parallel)
  const invoked = performance.now()
  // A drain's slice, fixed when it starts while others wait: its share of what is left of the plan,
  // so the places pass on in time; once nobody waits, the configured slice.
  const sliceFrom = (startedAt: number) => {
    const waiting = queue.waiting()
    const share = ((FAIR_PLAN_MS - (startedAt - invoked)) * parallel) / Math.max(1, waiting)
    const fair = Math.min(configured, Math.max(MIN_SLICE_MS, share))
    return () => (queue.waiting() === 0 ? configured : fair)
  }
  const drains = yieldingDrains(deps, opts)
  await queue.map(async project => {
    await drains.start(project, sliceFrom(performance.now()))
  })
  // Every place is free; while the drains' last requests are in flight, more signals are served.
  await serveTakenSignals(deps, opts, drains, parallel)
  const outcomes = await drains.outcomes()
  return new Map(outcomes.filter(o => o !== undefined))
}

function yieldingDrains(deps: Deps, opts: DrainOptions): YieldingDrains {
  const finishing = new Set<Promise<DrainOutcome>>()
  const all: Array<Promise<DrainOutcome>> = []
  const reported: Array<Promise<DrainOutcome>> = []
  return {
    async start(project, sliceMs, taken = false) {
      while (finishing.size >= MAX_YIELDED_DRAINS) await Promise.race(finishing)
      const drain = tracedDrain(deps, project, { ...opts, sliceMs })
      const outcome = drain.done.then(
        (result): DrainOutcome => {
          deps.log.debug('Drain finished', { project, ...result })
          return undefined
        },
        (error: unknown): DrainOutcome => {
          deps.metrics.forProject(project).crashed()
          deps.log.error('Dispatch of a project crashed; its signal will be redelivered', { project, error })
          return [project, error] as const
        },
      )
      all.push(outcome)
      // A taken signal's crash leaves the signal undeleted (it comes back); the batch's records are not its.
      if (!taken) reported.push(outcome)
      await drain.yielded
      // Its place is free; until its last requests are recorded it counts against MAX_YIELDED_DRAINS.
      finishing.add(outcome)
      void outcome.finally(() => {
        finishing.delete(outcome)
      })
      // Wrapped: an async function returning the promise itself would wait for it.
      return { outcome }
    },
    finishing: () => (finishing.size > 0 ? Promise.race(finishing) : undefined),
    room: () => MAX_YIELDED_DRAINS - finishing.size,
    outcomes: async () => {
      await Promise.all(all)
      return Promise.all(reported)
    },
  }
}

/** One drain, in an `actions.dispatch` consumer span when tracing is on: the project and what the drain came to. */
function tracedDrain(deps: Deps, project: string, opts: DrainOptions): StartedDrain {
  if (!deps.tracing.enabled) return startDrain(deps, project, opts)
  const attributes = { 'contember.actions.project': project }
  let yielded = () => {}
  const place = new Promise<void>(resolve => {
    yielded = resolve
  })
  const done = deps.tracing.span('actions.dispatch', { kind: SpanKind.CONSUMER, attributes }, async (span, trace) => {
    // The drain's lines carry the span's ids; its webhook and statement spans are children of `trace`.
    const drain = startDrain({ ...deps, log: deps.log.child(spanIds(span)) }, project, { ...opts, trace })
    void drain.yielded.then(yielded)
    const result = await drain.done
    span.setAttributes({
      'contember.actions.succeeded': result.succeeded,
      'contember.actions.retried': result.retried,
      'contember.actions.failed': result.failedAfterAttempt + result.failedUnknownTarget,
      'contember.actions.batches': result.batches,
      'contember.actions.stop': result.stop,
    })
    return result
  })
  return { yielded: place, done: done.finally(yielded) }
}

/** Maps with at most `limit` calls in flight, keeping the input order; `waiting` counts the items not started yet. */
function limiter<T>(items: readonly T[], limit: number) {
  const todo = items.map((item, i) => ({ item, i }))
  return {
    waiting: () => todo.length,
    async map<R>(fn: (item: T) => Promise<R>): Promise<R[]> {
      const out: R[] = new Array(items.length)
      await Promise.all(
        Array.from({ length: Math.min(limit, items.length) }, async () => {
          for (let job = todo.shift(); job; job = todo.shift()) out[job.i] = await fn(job.item)
        }),
      )
      return out
    },
  }
}

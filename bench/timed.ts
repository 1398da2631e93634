import { now } from './clock.js'
import type { CpuMeter, CpuShare } from './cpu.js'
import { DeadlineError } from './child.js'
import type { TableUpdates } from './hot.js'
import type { ReceiverProcess } from './receiverProcess.js'

/** One measured run of one scenario. */
export type RunResult = {
  events: number
  seconds: number
  /** Distinct events the receiver saw (delivery runs) or events written (enqueue runs). */
  delivered: number
  duplicates: number
  /** Every event arrived (or was written) and the contender's own bookkeeping agrees it is done. */
  allDelivered: boolean
  statementsPerEvent?: number
  cpu: CpuShare
  /** Actions' delivery rows: the row updates the run made in the bench's database (bench/hot.ts). */
  updates?: TableUpdates
  /** The traced row: spans the collector took from this run's delivery (bench/collector.ts). */
  spans?: number
  /** Why a run fell short: a missed deadline or an error. */
  note?: string
}

export const eventsPerSecond = (r: RunResult) => (r.seconds > 0 ? r.delivered / r.seconds : 0)

/** A contender consuming pre-enqueued work. */
export type Consumer = {
  /** Settles when the consumer stops on its own (Actions' drain returns when idle); workers leave it out. */
  finished?: Promise<unknown>
  /** Stops consuming, waiting (bounded) for the contender's own completion bookkeeping; true when it reports all done. */
  stop(): Promise<boolean>
}

export type Counter = { reset(): void; count(): number }

export type TimedContext = { receiver: ReceiverProcess; cpu: CpuMeter; deadlineMs: number }

// After a consumer that stops by itself has stopped, what is still on the wire arrives within this.
const AFTER_FINISH_GRACE_MS = 2_000

/**
 * Times the delivery of `events` pre-enqueued events: from just before `start()` to the arrival of the
 * last distinct event at the receiver. Bounded by the context's deadline; a miss is reported, not thrown.
 */
export async function timedDelivery(
  ctx: TimedContext,
  events: number,
  start: () => Promise<Consumer>,
  statements?: Counter,
): Promise<RunResult> {
  await ctx.receiver.reset(events)
  statements?.reset()
  const cpuStart = await ctx.cpu.start()
  const t0 = now()
  let note: string | undefined
  let end: number
  let consumer: Consumer | undefined
  try {
    consumer = await start()
    const complete = ctx.receiver.whenComplete(ctx.deadlineMs)
    // A consumer that finished on its own delivered all it ever will; do not wait out the whole deadline.
    const settled = consumer.finished?.then(() => ctx.receiver.whenComplete(AFTER_FINISH_GRACE_MS))
    end = await (settled ? Promise.race([complete, settled]) : complete)
  } catch (error) {
    end = now()
    note = error instanceof DeadlineError ? error.message : `error: ${error instanceof Error ? error.message : String(error)}`
  }
  const cpu = await ctx.cpu.stop(cpuStart)
  const done = consumer ? await consumer.stop().catch(() => false) : false
  const counts = await ctx.receiver.counts()
  return {
    events,
    seconds: (end - t0) / 1000,
    delivered: counts.delivered,
    duplicates: counts.duplicates,
    allDelivered: counts.delivered === events && done && note === undefined,
    ...(statements ? { statementsPerEvent: statements.count() / events } : {}),
    cpu,
    ...(note !== undefined ? { note } : {}),
  }
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes; returns the last answer. */
export async function pollUntil(check: () => Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (Date.now() >= deadline) return false
    await new Promise(resolve => setTimeout(resolve, everyMs))
  }
}

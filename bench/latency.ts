import { SQSClient } from '@aws-sdk/client-sqs'
import { createHandler } from '../functions/dispatch.js'
import { createSignals } from '../lib/signals.js'
import { lambdaContext } from '../local/lambda.js'
import { project, type ActionsBench, type OrderVariant } from './actions.js'
import { now } from './clock.js'
import type { EventSource } from './deployment.js'
import type { Load, ProducerProcess } from './producerProcess.js'
import { DeadlineError } from './child.js'
import { percentile } from './stats.js'
import type { RunResult, TimedContext } from './timed.js'

export type LatencyResult = RunResult & { p50: number; p99: number; maxMs: number; rate: number }

export type LatencyOptions = {
  /** Events per second offered. */
  rate: number
  seconds: number
  /** Events per enqueue request (a transaction's worth); requests go out every perRequest / rate seconds. */
  perRequest: number
  /** The deployed event source: batching window, batch size, concurrency, timeout. */
  source: EventSource
  /** The batchSize 1 project's ordering: per entity, every event its own (the default), or `ordering: 'none'`. */
  ordering?: Exclude<OrderVariant, 'keys10'>
}

/**
 * Delivered events in the table when a latency run starts: a deployment holds its retention's worth of
 * history, and the planner sizes its cached plans by the table it sees. Started from an empty table (as
 * nothing in production does), a record plan cached in the first second keeps scanning the whole table.
 */
const HISTORY_EVENTS = 100_000
/**
 * Seconds of untimed load at the offered rate before the measured seconds. With 2 s, some runs at
 * 2,000/s still built a backlog in their first 1.5 s (mean latency rising to 490 ms, then draining
 * within 4 s); the cause was not pinned down. With 4 s, three runs in a row stayed under 250 ms p99.
 */
const WARMUP_SECONDS = 4

let queues = 0

/**
 * Enqueue-to-delivery latency at a steady rate, through the deployed path. The producer process
 * (bench/producer.ts) plays AWS's side: the enqueue Lambda (`enqueue` at the offered rate with its own
 * pool, each request sending a signal to its fauxqs emulator), SQS, and the event source mapping (the
 * local stack's poller with the deployment's batch size, concurrency and batching window,
 * bench/eventSource.ts). This process plays the dispatch Lambda only: each invocation arrives over IPC
 * and runs the dispatch handler (functions/dispatch.ts) with a Lambda context made here. Each event
 * carries its enqueue time in `values.t`; the receiver subtracts it from the arrival time (both on
 * bench/clock.ts's epoch clock).
 */
export async function measureLatency(
  actions: ActionsBench,
  producer: ProducerProcess,
  ctx: TimedContext,
  opts: LatencyOptions,
): Promise<LatencyResult> {
  const target = project(1, opts.ordering)
  await actions.truncate()
  await actions.seedHistory(target, HISTORY_EVENTS, opts.ordering !== 'none')
  const run = await startRun(actions, producer, opts)
  const requests = Math.max(1, Math.round((opts.rate * opts.seconds) / opts.perRequest))
  const events = requests * opts.perRequest
  const intervalMs = (opts.perRequest / opts.rate) * 1000
  const load = (requests: number, firstId: number, boundMs: number) =>
    producer.load({ queueUrl: run.queueUrl, project: target, requests, perRequest: opts.perRequest, intervalMs, firstId }, boundMs)

  // Untimed warm-up at the same rate, as every other row has one: the poller's SDK clients, this
  // process's JIT, the pools' connections and the statements' plans (the seeding's ANALYZE invalidated
  // them) start cold, and without it the first second's events made the whole tail (p99 200 ms at
  // 500/s, every event in that tail from the first 5% of the run; 13 ms p50).
  const warmRequests = Math.max(1, Math.round((opts.rate * WARMUP_SECONDS) / opts.perRequest))
  let note: string | undefined
  try {
    await ctx.receiver.reset(warmRequests * opts.perRequest)
    await load(warmRequests, 0, WARMUP_SECONDS * 1000 + ctx.deadlineMs)
    await ctx.receiver.whenComplete(ctx.deadlineMs)
  } catch (error) {
    note = `warm-up: ${error instanceof Error ? error.message : String(error)}`
  }
  await ctx.receiver.reset(events)

  // Enqueue has its own pool in the producer: what is counted here is the dispatch side's statements.
  actions.statements.reset()
  const cpuStart = await ctx.cpu.start()
  const started = now()
  let loaded: Load | undefined
  let end: number
  try {
    // The load itself takes `seconds`; what is still in flight after it is bounded like a delivery run.
    // Entity ids past the warm-up's: with per-entity order, distinct keys means none shared with an event still in flight.
    loaded = await load(requests, warmRequests * opts.perRequest, opts.seconds * 1000 + ctx.deadlineMs)
    end = await ctx.receiver.whenComplete(ctx.deadlineMs)
  } catch (error) {
    end = now()
    note = error instanceof DeadlineError ? error.message : String(error)
  }
  const cpu = await ctx.cpu.stop(cpuStart)
  const statements = actions.statements.count()
  note = joinNotes(note, await run.stop(), loaded)
  const counts = await ctx.receiver.counts({ latencies: true })
  const latencies = (counts.latencies ?? []).sort((a, b) => a - b)
  return {
    events,
    seconds: (end - (loaded?.t0 ?? started)) / 1000,
    delivered: counts.delivered,
    duplicates: counts.duplicates,
    allDelivered: counts.delivered === events && note === undefined,
    statementsPerEvent: statements / events,
    cpu,
    rate: opts.rate,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    maxMs: latencies[latencies.length - 1] ?? NaN,
    ...(note !== undefined ? { note } : {}),
  }
}

/** What one latency run stops at its end: the poller (with what it had to warn about) and this process's SQS client. */
type Run = { queueUrl: string; stop(): Promise<{ problems: number } | { failed: string }> }

/**
 * A queue of the run's own, the dispatch handler over it, and the producer's event source invoking the
 * handler here over IPC.
 */
async function startRun(actions: ActionsBench, producer: ProducerProcess, opts: LatencyOptions): Promise<Run> {
  const name = `bench-latency-${++queues}`
  // Signals of this run go to a queue of its own, so leftovers of earlier runs cannot wake the handler.
  const queueUrl = await producer.createQueue(name)
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' }
  // The handler's own signals (a drain's continuation) go to the same queue, as in the deployment.
  const signalClient = new SQSClient({ endpoint: producer.endpoint, region: 'us-east-1', credentials })
  const deps = { ...actions.deps, signals: createSignals(signalClient, queueUrl) }
  const handler = createHandler(() => deps)
  // The event source runs in the producer, as AWS runs it; an invocation is the handler here, with a
  // context whose remaining time starts when the handler does.
  const poller = await producer.startPoller(
    { queueUrl, queueArn: `arn:aws:sqs:us-east-1:000000000000:${name}`, source: opts.source },
    event => handler(event, lambdaContext('bench-dispatch', opts.source.timeoutMs)),
  )
  return {
    queueUrl,
    stop: async () => {
      const stopped = await poller.stop().then(
        r => ({ problems: r.problems }),
        (error: unknown) => ({ failed: error instanceof Error ? error.message : String(error) }),
      )
      signalClient.destroy()
      return stopped
    },
  }
}

/** The run's note: what fell short, the poller not stopping, and counted enqueue errors and poller warnings. */
function joinNotes(
  note: string | undefined,
  stopped: { problems: number } | { failed: string },
  loaded: Load | undefined,
): string | undefined {
  const notes = [note]
  if ('failed' in stopped) notes.push(`the poller did not stop: ${stopped.failed}`)
  const pollerProblems = 'problems' in stopped ? stopped.problems : 0
  const enqueueErrors = loaded?.enqueueErrors ?? 0
  if (enqueueErrors || pollerProblems) notes.push(`${enqueueErrors} enqueue errors, ${pollerProblems} poller warnings`)
  const joined = notes.filter(Boolean).join('; ')
  return joined === '' ? undefined : joined
}

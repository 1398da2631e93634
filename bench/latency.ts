import { SQSClient, type Message } from '@aws-sdk/client-sqs'
import { createHandler } from '../functions/dispatch.js'
import type { Logger } from '../lib/log.js'
import { createSignals } from '../lib/signals.js'
import { lambdaContext } from '../local/lambda.js'
import { startPoller } from '../local/poller.js'
import { project, type ActionsBench } from './actions.js'
import { now } from './clock.js'
import type { EventSource } from './deployment.js'
import type { Load, ProducerProcess } from './producerProcess.js'
import { DeadlineError } from './receiverProcess.js'
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
}

/** How often a batching window looks for more signals while it is open (short polls): fine against a 1 s window, and few enough receives (4 pollers × 20/s) that they do not load the emulator (in the producer process) or this process's handler. */
const WINDOW_POLL_MS = 50

/**
 * Delivered events in the table when a latency run starts: a deployment holds its retention's worth of
 * history, and the planner sizes its cached plans by the table it sees. Started from an empty table (as
 * nothing in production does), a record plan cached in the first second keeps scanning the whole table.
 */
const HISTORY_EVENTS = 100_000

let queues = 0

/**
 * Enqueue-to-delivery latency at a steady rate, through the deployed path. The producer process
 * (bench/producer.ts) plays the enqueue Lambda and SQS: it runs `enqueue` at the offered rate with its
 * own pool, each request sending a signal to its fauxqs emulator. This process plays the dispatch side
 * only: the local stack's poller (local/poller.ts) receives from the producer's emulator and feeds the
 * dispatch handler (functions/dispatch.ts) as the Lambda event source does, with the deployment's batch
 * size, concurrency and batching window. Each event carries its enqueue time in `values.t`; the
 * receiver subtracts it from the arrival time (both on bench/clock.ts's epoch clock).
 */
export async function measureLatency(actions: ActionsBench, producer: ProducerProcess, ctx: TimedContext, opts: LatencyOptions): Promise<LatencyResult> {
  await actions.truncate()
  await actions.seedHistory(project(1), HISTORY_EVENTS)
  const name = `bench-latency-${++queues}`
  // Signals of this run go to a queue of its own, so leftovers of earlier runs cannot wake the handler.
  const queueUrl = await producer.createQueue(name)
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' }
  // The handler's own signals (a drain's continuation) go to the same queue, as in the deployment.
  const signalClient = new SQSClient({ endpoint: producer.endpoint, region: 'us-east-1', credentials })
  const deps = { ...actions.deps, signals: createSignals(signalClient, queueUrl) }
  const handler = createHandler(() => deps)
  const requests = Math.max(1, Math.round((opts.rate * opts.seconds) / opts.perRequest))
  const events = requests * opts.perRequest
  const intervalMs = (opts.perRequest / opts.rate) * 1000
  await ctx.receiver.reset(events)

  // The poller's client gathers like the event source: its receives wait out the batching window.
  const pollerClient = new SQSClient({ endpoint: producer.endpoint, region: 'us-east-1', credentials })
  withBatchingWindow(pollerClient, opts.source.batchSize, opts.source.batchingWindowMs)
  let pollerProblems = 0
  // The poller's warnings (a failed receive, a crashed invocation) are counted into the run's note.
  const quietLog: Logger = { debug: () => {}, info: () => {}, warn: () => { pollerProblems++ }, error: () => { pollerProblems++ }, emit: () => {}, child: () => quietLog }
  const poller = startPoller({
    sqs: pollerClient, queueUrl, queueArn: `arn:aws:sqs:us-east-1:000000000000:${name}`,
    batchSize: opts.source.batchSize, concurrency: opts.source.maximumConcurrency, timeoutMs: opts.source.timeoutMs,
    invoke: handler, context: () => lambdaContext('bench-dispatch', opts.source.timeoutMs), log: quietLog,
  })

  // Enqueue has its own pool in the producer: what is counted here is the dispatch side's statements.
  actions.statements.reset()
  const cpuStart = await ctx.cpu.start()
  const started = now()
  let load: Load | undefined
  let note: string | undefined
  let end: number
  try {
    // The load itself takes `seconds`; what is still in flight after it is bounded like a delivery run.
    load = await producer.load({ queueUrl, project: project(1), requests, perRequest: opts.perRequest, intervalMs }, opts.seconds * 1000 + ctx.deadlineMs)
    end = await ctx.receiver.whenComplete(ctx.deadlineMs)
  } catch (error) {
    end = now()
    note = error instanceof DeadlineError ? error.message : String(error)
  }
  const cpu = await ctx.cpu.stop(cpuStart)
  const statements = actions.statements.count()
  await poller.stop()
  pollerClient.destroy()
  signalClient.destroy()
  const counts = await ctx.receiver.counts({ latencies: true })
  const latencies = (counts.latencies ?? []).sort((a, b) => a - b)
  const enqueueErrors = load?.enqueueErrors ?? 0
  if (enqueueErrors || pollerProblems) note = [note, `${enqueueErrors} enqueue errors, ${pollerProblems} poller warnings`].filter(Boolean).join('; ')
  return {
    events,
    seconds: (end - (load?.t0 ?? started)) / 1000,
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

/**
 * Makes the client's ReceiveMessage gather as Lambda's SQS event source does with a batching window:
 * once a receive returns a first signal, it keeps receiving (short polls) until `batchSize` signals
 * are in hand or `windowMs` has passed since that first one. A window of 0 leaves the client as is.
 */
export function withBatchingWindow(sqs: SQSClient, batchSize: number, windowMs: number): void {
  if (windowMs <= 0) return
  sqs.middlewareStack.add((next, context) => async args => {
    const first = await next(args)
    const input = args.input
    if (context.commandName !== 'ReceiveMessageCommand' || !('MaxNumberOfMessages' in input)) return first
    const messages: Message[] = 'Messages' in first.output ? [...(first.output.Messages ?? [])] : []
    if (messages.length === 0) return first
    const windowEnd = Date.now() + windowMs
    while (messages.length < batchSize && Date.now() < windowEnd) {
      await new Promise(resolve => setTimeout(resolve, Math.min(WINDOW_POLL_MS, windowEnd - Date.now())))
      const more = await next({ ...args, input: { ...input, MaxNumberOfMessages: batchSize - messages.length, WaitTimeSeconds: 0 } })
      if ('Messages' in more.output) messages.push(...(more.output.Messages ?? []))
    }
    return { ...first, output: { ...first.output, Messages: messages } }
  }, { step: 'initialize', name: 'benchBatchingWindow' })
}

import { SQSClient, type Message } from '@aws-sdk/client-sqs'
import type { FauxqsServer } from 'fauxqs'
import { createHandler } from '../functions/dispatch.js'
import { enqueue } from '../lib/enqueue.js'
import type { Logger } from '../lib/log.js'
import { createSignals } from '../lib/signals.js'
import { lambdaContext } from '../local/lambda.js'
import { startPoller } from '../local/poller.js'
import { project, request, type ActionsBench } from './actions.js'
import { now } from './clock.js'
import type { EventSource } from './deployment.js'
import { articlePayload } from './jobs.js'
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

/** How often a batching window looks for more signals while it is open (short polls): fine against a 1 s window, and few enough receives (4 pollers × 20/s) that the emulator, which runs in the bench process, does not eat the handler's CPU. */
const WINDOW_POLL_MS = 50

let queues = 0

/**
 * Enqueue-to-delivery latency at a steady rate, through the deployed path: `enqueue` sends a signal per
 * request to the SQS emulator; the local stack's poller (local/poller.ts) feeds them to the dispatch
 * handler (functions/dispatch.ts) as the Lambda event source does, with the deployment's batch size,
 * concurrency and batching window. Each event carries its enqueue time in `values.t`; the receiver
 * subtracts it from the arrival time.
 */
export async function measureLatency(actions: ActionsBench, server: FauxqsServer, ctx: TimedContext, opts: LatencyOptions): Promise<LatencyResult> {
  await actions.truncate()
  const { queueUrl } = server.createQueue(`bench-latency-${++queues}`)
  const endpoint = `http://127.0.0.1:${server.port}`
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' }
  // Signals of this run go to a queue of its own, so leftovers of earlier runs cannot wake the handler.
  const signalClient = new SQSClient({ endpoint, region: 'us-east-1', credentials })
  const deps = { ...actions.deps, signals: createSignals(signalClient, queueUrl) }
  const handler = createHandler(() => deps)
  const requests = Math.max(1, Math.round((opts.rate * opts.seconds) / opts.perRequest))
  const events = requests * opts.perRequest
  const intervalMs = (opts.perRequest / opts.rate) * 1000
  await ctx.receiver.reset(events)

  // The poller's client gathers like the event source: its receives wait out the batching window.
  const pollerClient = new SQSClient({ endpoint, region: 'us-east-1', credentials })
  withBatchingWindow(pollerClient, opts.source.batchSize, opts.source.batchingWindowMs)
  let pollerProblems = 0
  // The poller's warnings (a failed receive, a crashed invocation) are counted into the run's note.
  const quietLog: Logger = { debug: () => {}, info: () => {}, warn: () => { pollerProblems++ }, error: () => { pollerProblems++ }, emit: () => {}, child: () => quietLog }
  const poller = startPoller({
    sqs: pollerClient, queueUrl, queueArn: `arn:aws:sqs:us-east-1:000000000000:bench-latency-${queues}`,
    batchSize: opts.source.batchSize, concurrency: opts.source.maximumConcurrency, timeoutMs: opts.source.timeoutMs,
    invoke: handler, context: () => lambdaContext('bench-dispatch', opts.source.timeoutMs), log: quietLog,
  })

  const cpuStart = await ctx.cpu.start()
  const t0 = now()
  const pending = new Set<Promise<unknown>>()
  let enqueueErrors = 0
  for (let r = 0; r < requests; r++) {
    // Paced against the start, not the previous request, so a slow request does not lower the rate.
    const wait = t0 + r * intervalMs - now()
    if (wait > 0) await new Promise(resolve => setTimeout(resolve, wait))
    const t = now()
    const payloads = Array.from({ length: opts.perRequest }, (_, j) => articlePayload(r * opts.perRequest + j, t))
    const p = enqueue(deps, request(project(1), payloads)).catch(() => { enqueueErrors++ })
    pending.add(p)
    void p.finally(() => pending.delete(p))
  }
  await Promise.all(pending)
  let note: string | undefined
  let end: number
  try {
    end = await ctx.receiver.whenComplete(ctx.deadlineMs)
  } catch (error) {
    end = now()
    note = error instanceof DeadlineError ? error.message : String(error)
  }
  const cpu = await ctx.cpu.stop(cpuStart)
  await poller.stop()
  pollerClient.destroy()
  signalClient.destroy()
  const counts = await ctx.receiver.counts({ latencies: true })
  const latencies = (counts.latencies ?? []).sort((a, b) => a - b)
  if (enqueueErrors || pollerProblems) note = [note, `${enqueueErrors} enqueue errors, ${pollerProblems} poller warnings`].filter(Boolean).join('; ')
  return {
    events,
    seconds: (end - t0) / 1000,
    delivered: counts.delivered,
    duplicates: counts.duplicates,
    allDelivered: counts.delivered === events && note === undefined,
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

import { DeleteMessageBatchCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs'
import type { Context, SQSRecord } from 'aws-lambda'
import type { FauxqsServer } from 'fauxqs'
import { createHandler } from '../functions/dispatch.js'
import { enqueue } from '../lib/enqueue.js'
import { createSignals } from '../lib/signals.js'
import { project, request, type ActionsBench } from './actions.js'
import { now } from './clock.js'
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
  /** Emulated event-source batching window: a poller keeps collecting up to 10 signals for this long. */
  batchWindowMs: number
}

// The deployed dispatch function's timeout (serverless.yml dispatchTimeout); each invocation's clock starts here.
const INVOCATION_MS = 120_000
const SQS_BATCH = 10

let queues = 0

/**
 * Enqueue-to-delivery latency at a steady rate, through the deployed path: `enqueue` sends a signal per
 * request to an in-process SQS emulator; DISPATCH_MAX_CONCURRENCY pollers feed the signals to the dispatch
 * handler (functions/dispatch.ts) as the Lambda event source would, and delete what it did not report failed.
 * Each event carries its enqueue time in `values.t`; the receiver subtracts it from the arrival time.
 */
export async function measureLatency(actions: ActionsBench, server: FauxqsServer, sqs: SQSClient, ctx: TimedContext, opts: LatencyOptions): Promise<LatencyResult> {
  await actions.truncate()
  const { queueUrl } = server.createQueue(`bench-latency-${++queues}`)
  // Signals of this run go to a queue of its own, so leftovers of earlier runs cannot wake the handler.
  const deps = { ...actions.deps, signals: createSignals(sqs, queueUrl) }
  const handler = createHandler(() => deps)
  const requests = Math.max(1, Math.round((opts.rate * opts.seconds) / opts.perRequest))
  const events = requests * opts.perRequest
  const intervalMs = (opts.perRequest / opts.rate) * 1000
  await ctx.receiver.reset(events)

  let stopping = false
  let handlerErrors = 0
  const poll = async () => {
    while (!stopping) {
      const messages = await receiveBatch(sqs, queueUrl, opts.batchWindowMs, () => stopping)
      if (messages.length === 0) continue
      let failed = new Set<string>()
      try {
        const res: unknown = await handler({ Records: messages.map(toRecord) }, lambdaContext(INVOCATION_MS))
        failed = failedIds(res)
      } catch {
        // A failed invocation leaves its messages to reappear, as Lambda does.
        handlerErrors++
        continue
      }
      const done = messages.filter(m => m.MessageId && !failed.has(m.MessageId))
      if (done.length) {
        await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })) }))
      }
    }
  }
  let pollerError: unknown
  const pollers = Array.from({ length: actions.config.DISPATCH_MAX_CONCURRENCY }, () => poll().catch(e => { pollerError ??= e }))

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
  stopping = true
  await Promise.all(pollers)
  const counts = await ctx.receiver.counts({ latencies: true })
  const latencies = (counts.latencies ?? []).sort((a, b) => a - b)
  if (pollerError) note = [note, `a poller failed: ${pollerError instanceof Error ? pollerError.message : String(pollerError)}`].filter(Boolean).join('; ')
  if (enqueueErrors || handlerErrors) note = [note, `${enqueueErrors} enqueue errors, ${handlerErrors} handler errors`].filter(Boolean).join('; ')
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

/** Up to ten messages: returns as soon as one arrives, or, with a batching window, when ten have or the window closed. */
async function receiveBatch(sqs: SQSClient, queueUrl: string, windowMs: number, stopping: () => boolean): Promise<Message[]> {
  const out: Message[] = []
  const windowEnd = Date.now() + windowMs
  while (out.length < SQS_BATCH && !stopping()) {
    const waitSeconds = out.length === 0 ? 1 : Math.max(0, Math.ceil((windowEnd - Date.now()) / 1000))
    const res = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: SQS_BATCH - out.length, WaitTimeSeconds: Math.min(1, waitSeconds) }))
    out.push(...(res.Messages ?? []))
    if (out.length > 0 && Date.now() >= windowEnd) break
    // Without a window the first non-empty receive is the batch (the event source's default).
    if (out.length > 0 && windowMs === 0) break
  }
  return out
}

function toRecord(m: Message): SQSRecord {
  return {
    messageId: m.MessageId ?? '',
    receiptHandle: m.ReceiptHandle ?? '',
    body: m.Body ?? '',
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(Date.now()), SenderId: 'bench', ApproximateFirstReceiveTimestamp: String(Date.now()) },
    messageAttributes: {},
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:bench-latency',
    awsRegion: 'us-east-1',
  }
}

function lambdaContext(timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'bench-dispatch',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:bench-dispatch',
    memoryLimitInMB: '512',
    awsRequestId: 'bench',
    logGroupName: '/aws/lambda/bench-dispatch',
    logStreamName: 'bench',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  }
}

/** Message ids the handler reported failed (ReportBatchItemFailures). */
function failedIds(res: unknown): Set<string> {
  const out = new Set<string>()
  if (typeof res !== 'object' || res === null || !('batchItemFailures' in res) || !Array.isArray(res.batchItemFailures)) return out
  for (const f of res.batchItemFailures) {
    if (typeof f === 'object' && f !== null && 'itemIdentifier' in f && typeof f.itemIdentifier === 'string') out.add(f.itemIdentifier)
  }
  return out
}

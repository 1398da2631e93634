/**
 * The dispatch function's SQS event source mapping as the latency rows run it: the local stack's
 * poller (local/poller.ts) with the deployed batch size, concurrency, timeout and batching window.
 * It runs in the producer process (bench/producer.ts), with the SQS emulator, because in the
 * deployment the mapping is AWS's work: the dispatch Lambda never receives or deletes its signals.
 */
import { SQSClient, type Message } from '@aws-sdk/client-sqs'
import type { SQSEvent } from 'aws-lambda'
import type { Logger } from '../lib/log.js'
import { lambdaContext } from '../local/lambda.js'
import { startPoller } from '../local/poller.js'
import type { EventSource } from './deployment.js'

/** How often a batching window looks for more signals while it is open (short polls): fine against a 1 s window, and few enough receives (4 pollers × 20/s) that they do not load the emulator. */
const WINDOW_POLL_MS = 50

export type EventSourceOptions = { endpoint: string; queueUrl: string; queueArn: string; source: EventSource }

/**
 * Starts the pollers; each batch goes to `invoke` (the dispatch handler, elsewhere), whose answer the
 * poller settles the batch by, as startPoller does. `stop` resolves with the poller's warnings and
 * errors (a failed receive, a failed invocation), which the run reports.
 */
export function startEventSource(opts: EventSourceOptions, invoke: (event: SQSEvent) => Promise<unknown>): { stop(): Promise<number> } {
  const sqs = new SQSClient({ endpoint: opts.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
  // The poller's client gathers like the event source: its receives wait out the batching window.
  withBatchingWindow(sqs, opts.source.batchSize, opts.source.batchingWindowMs)
  let problems = 0
  const quietLog: Logger = {
    debug: () => {},
    info: () => {},
    warn: () => {
      problems++
    },
    error: () => {
      problems++
    },
    emit: () => {},
    child: () => quietLog,
  }
  const poller = startPoller({
    sqs,
    queueUrl: opts.queueUrl,
    queueArn: opts.queueArn,
    batchSize: opts.source.batchSize,
    concurrency: opts.source.maximumConcurrency,
    timeoutMs: opts.source.timeoutMs,
    // The handler's context is built where the handler runs, so its remaining time starts there.
    invoke: event => invoke(event),
    context: () => lambdaContext('bench-dispatch', opts.source.timeoutMs),
    log: quietLog,
  })
  return {
    stop: async () => {
      await poller.stop()
      sqs.destroy()
      return problems
    },
  }
}

/**
 * Makes the client's ReceiveMessage gather as Lambda's SQS event source does with a batching window:
 * once a receive returns a first signal, it keeps receiving (short polls) until `batchSize` signals
 * are in hand or `windowMs` has passed since that first one. A window of 0 leaves the client as is.
 */
export function withBatchingWindow(sqs: SQSClient, batchSize: number, windowMs: number): void {
  if (windowMs <= 0) return
  sqs.middlewareStack.add(
    (next, context) => async args => {
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
    },
    { step: 'initialize', name: 'benchBatchingWindow' },
  )
}

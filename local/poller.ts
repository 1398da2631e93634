import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs'
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda'
import type { Logger } from '../lib/log.js'

export type PollerOptions = {
  sqs: SQSClient
  queueUrl: string
  queueArn: string
  /** Like the event source's batchSize. */
  batchSize: number
  /** Like maximumConcurrency: pollers running side by side. */
  concurrency: number
  /** Like the function timeout; also the visibility timeout given to received messages. */
  timeoutMs: number
  /** The middy handler; its declared type is the inner handler's, its answer the middleware's SQSBatchResponse. */
  invoke: (event: SQSEvent, context: Context) => Promise<unknown>
  context: () => Context
  log: Logger
}

/**
 * Drives a handler from a queue the way Lambda's SQS event source does: long-polls batches, invokes
 * the handler with a real SQSEvent, deletes the records it did not report as failures, and leaves the
 * failed ones (or all, if the invocation throws) to reappear after their visibility timeout.
 */
export function startPoller(opts: PollerOptions): { stop(): Promise<void> } {
  let stopping = false
  const abort = new AbortController()
  const loop = async () => {
    while (!stopping) {
      let messages: Message[] = []
      try {
        const res = await opts.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: opts.queueUrl,
            MaxNumberOfMessages: Math.min(10, opts.batchSize),
            WaitTimeSeconds: 1,
            VisibilityTimeout: Math.ceil(opts.timeoutMs / 1000),
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: abort.signal },
        )
        messages = res.Messages ?? []
      } catch (error) {
        if (stopping) return
        opts.log.warn('Could not receive from the signal queue; retrying', { error })
        await new Promise(r => setTimeout(r, 1000))
        continue
      }
      if (messages.length === 0) continue
      const event: SQSEvent = { Records: messages.map(m => toRecord(m, opts.queueArn)) }
      let failed: Set<string>
      try {
        failed = failedIds(await opts.invoke(event, opts.context()))
      } catch (error) {
        opts.log.error('Dispatch invocation failed; its signals reappear after the visibility timeout', { error })
        continue
      }
      const done = messages.filter(m => m.MessageId && !failed.has(m.MessageId))
      try {
        if (done.length) {
          await opts.sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: opts.queueUrl,
              Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
            }),
          )
        }
        // The event source returns failed records to the queue after their visibility timeout; a
        // short one here keeps local retries of crashed drains quick.
        const retry = messages.filter(m => m.MessageId && failed.has(m.MessageId))
        if (retry.length) {
          await opts.sqs.send(
            new ChangeMessageVisibilityBatchCommand({
              QueueUrl: opts.queueUrl,
              Entries: retry.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 5 })),
            }),
          )
        }
      } catch (error) {
        opts.log.warn('Could not settle received signals; they reappear after the visibility timeout', { error })
      }
    }
  }
  const loops = Array.from({ length: opts.concurrency }, () => loop())
  return {
    stop: async () => {
      stopping = true
      abort.abort()
      await Promise.allSettled(loops)
    },
  }
}

function failedIds(res: unknown): Set<string> {
  const failures: SQSBatchResponse['batchItemFailures'] =
    typeof res === 'object' && res !== null && 'batchItemFailures' in res && Array.isArray(res.batchItemFailures)
      ? res.batchItemFailures
      : []
  return new Set(failures.map(f => f.itemIdentifier))
}

function toRecord(m: Message, arn: string): SQSRecord {
  const a = m.Attributes ?? {}
  return {
    messageId: m.MessageId ?? '',
    receiptHandle: m.ReceiptHandle ?? '',
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? String(Date.now()),
      SenderId: a.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: arn,
    awsRegion: 'local',
  }
}

import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs'
import { describeCause } from './errors.js'

/** SQS allows at most this delay on a message. */
export const MAX_DELAY_SECONDS = 900

/** The body of a signal: "this project may have due events". */
export type Signal = { project: string }

export type Signals = {
  /** Sends one signal, optionally delayed (capped at 900 s). */
  send(project: string, delaySeconds?: number): Promise<void>
  /** Sends `count` signals for each project, ten to a request. */
  sendMany(entries: Array<{ project: string; count: number }>): Promise<void>
  /**
   * Takes up to `max` (at most 10) signals waiting now, without a long poll, hidden from other
   * consumers for `visibilitySeconds`: a dispatch invocation that only waits for requests in flight
   * serves them itself (lib/dispatch/projects.ts). Absent where the queue cannot be read.
   */
  take?(max: number, visibilitySeconds: number): Promise<TakenSignal[]>
  /** Deletes taken signals whose work is done. */
  done?(receipts: readonly string[]): Promise<void>
}

/** A signal taken from the queue: its body as sent, and the handle that deletes it. */
export type TakenSignal = { body: string; receipt: string }

/** Most messages one ReceiveMessage or DeleteMessageBatch call handles (an SQS limit). */
const SQS_BATCH_MAX = 10
/** Longest an SQS message may stay hidden (an SQS limit: 12 hours). */
const MAX_VISIBILITY_SECONDS = 43_200

/** Thrown when the queue refused or did not answer; its cause is the SDK error's name and code (SDK messages may quote the queue URL). */
export class SignalError extends Error {
  override name = 'SignalError'
}

/** Signal sender over one queue. */
export function createSignals(sqs: SQSClient, queueUrl: string): Signals {
  const wrap = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn()
    } catch (cause) {
      throw new SignalError(`could not send ${what}: ${cause instanceof Error ? cause.name : 'error'}`, { cause: describeCause(cause) })
    }
  }
  return {
    send: (project, delaySeconds = 0) =>
      wrap('signal', () =>
        sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: JSON.stringify({ project } satisfies Signal),
            DelaySeconds: Math.max(0, Math.min(MAX_DELAY_SECONDS, Math.ceil(delaySeconds))),
          }),
        ),
      ),
    sendMany: async entries => {
      const bodies = entries.flatMap(e => Array.from({ length: e.count }, () => JSON.stringify({ project: e.project } satisfies Signal)))
      for (let i = 0; i < bodies.length; i += 10) {
        const chunk = bodies.slice(i, i + 10)
        await wrap('signals', async () => {
          const out = await sqs.send(
            new SendMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: chunk.map((body, j) => ({ Id: String(j), MessageBody: body })),
            }),
          )
          if (out.Failed?.length) throw new Error(`${out.Failed.length} of ${chunk.length} signals refused`)
        })
      }
    },
    take: async (max, visibilitySeconds) => {
      let taken: TakenSignal[] = []
      await wrap('a request for signals', async () => {
        const out = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: Math.max(1, Math.min(SQS_BATCH_MAX, Math.trunc(max))),
            WaitTimeSeconds: 0,
            VisibilityTimeout: Math.max(1, Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(visibilitySeconds))),
          }),
        )
        taken = (out.Messages ?? []).flatMap(m => (m.ReceiptHandle ? [{ body: m.Body ?? '', receipt: m.ReceiptHandle }] : []))
      })
      return taken
    },
    done: async receipts => {
      for (let i = 0; i < receipts.length; i += SQS_BATCH_MAX) {
        const chunk = receipts.slice(i, i + SQS_BATCH_MAX)
        await wrap('signal deletions', () =>
          sqs.send(
            new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: chunk.map((r, j) => ({ Id: String(j), ReceiptHandle: r })) }),
          ),
        )
      }
    },
  }
}

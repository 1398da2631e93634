import { forkChild, withTimeout } from './child.js'
import type { Counts, FromReceiver, ToReceiver } from './receiver.js'

export type { Counts } from './receiver.js'

/** The parent's side of the receiver process. */
export type ReceiverProcess = {
  url: string
  /** Clears the counts and arms `whenComplete` for `expect` distinct events. */
  reset(expect: number): Promise<void>
  /** Epoch ms of the arrival that completed the armed count; rejects after `timeoutMs`. */
  whenComplete(timeoutMs: number): Promise<number>
  counts(opts?: { latencies?: boolean }): Promise<Counts>
  stop(): Promise<void>
}

/** Forks bench/receiver.ts under tsx and waits until it listens. */
export async function startReceiverProcess(): Promise<ReceiverProcess> {
  let round = 0
  let completedAt: number | undefined
  let completeWaiters: Array<(at: number) => void> = []
  const child = forkChild<ToReceiver, FromReceiver>(
    new URL('./receiver.ts', import.meta.url),
    { BENCH_RECEIVER: '1' },
    'the receiver',
    m => {
      if (m.type !== 'complete') return false
      if (m.round === round) {
        completedAt = m.at
        for (const w of completeWaiters.splice(0)) w(m.at)
      }
      return true
    },
  )
  const url = await child.first(m => (m.type === 'listening' ? m.url : undefined), 'start listening')

  return {
    url,
    reset: async expect => {
      round++
      completedAt = undefined
      completeWaiters = []
      await child.ask({ type: 'reset', round, expect })
    },
    whenComplete: timeoutMs => {
      if (completedAt !== undefined) return Promise.resolve(completedAt)
      return withTimeout(
        new Promise<number>(resolve => {
          completeWaiters.push(resolve)
        }),
        timeoutMs,
        'not every event arrived in time',
      )
    },
    counts: async (opts = {}) => {
      const reply = await child.ask({ type: 'read', latencies: opts.latencies ?? false })
      if (reply.type !== 'counts') throw new Error(`unexpected receiver reply ${reply.type}`)
      return reply.counts
    },
    stop: child.stop,
  }
}

import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
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

const START_TIMEOUT_MS = 20_000
const REPLY_TIMEOUT_MS = 10_000

/** Forks bench/receiver.ts under tsx and waits until it listens. */
export async function startReceiverProcess(): Promise<ReceiverProcess> {
  const child = fork(fileURLToPath(new URL('./receiver.ts', import.meta.url)), [], {
    // The child runs TypeScript the way the parent does: through tsx's loader, resolved from here.
    execArgv: ['--import', import.meta.resolve('tsx')],
    env: { ...process.env, BENCH_RECEIVER: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  let nextId = 0
  let round = 0
  let completedAt: number | undefined
  let completeWaiters: Array<(at: number) => void> = []
  const replies = new Map<number, (m: FromReceiver) => void>()
  let exited = false
  const exitWaiters: Array<() => void> = []

  child.on('message', (m: FromReceiver) => {
    if (m.type === 'complete') {
      if (m.round !== round) return
      completedAt = m.at
      for (const w of completeWaiters.splice(0)) w(m.at)
    } else if (m.type !== 'listening') {
      replies.get(m.id)?.(m)
      replies.delete(m.id)
    }
  })
  child.on('exit', () => {
    exited = true
    for (const w of exitWaiters.splice(0)) w()
  })

  const url = await withTimeout(new Promise<string>((resolve, reject) => {
    child.on('message', (m: FromReceiver) => { if (m.type === 'listening') resolve(m.url) })
    child.once('exit', code => reject(new Error(`the receiver exited with code ${code} before listening`)))
  }), START_TIMEOUT_MS, 'the receiver did not start listening')

  const ask = (build: (id: number) => ToReceiver): Promise<FromReceiver> => {
    const message = build(++nextId)
    return withTimeout(new Promise<FromReceiver>(resolve => {
      replies.set(message.id, resolve)
      child.send(message)
    }), REPLY_TIMEOUT_MS, `the receiver did not answer "${message.type}"`)
  }

  return {
    url,
    reset: async expect => {
      round++
      completedAt = undefined
      completeWaiters = []
      await ask(id => ({ type: 'reset', id, round, expect }))
    },
    whenComplete: timeoutMs => {
      if (completedAt !== undefined) return Promise.resolve(completedAt)
      return withTimeout(new Promise<number>(resolve => { completeWaiters.push(resolve) }), timeoutMs, 'not every event arrived in time')
    },
    counts: async (opts = {}) => {
      const reply = await ask(id => ({ type: 'read', id, latencies: opts.latencies ?? false }))
      if (reply.type !== 'counts') throw new Error(`unexpected receiver reply ${reply.type}`)
      return reply.counts
    },
    stop: async () => {
      if (exited) return
      const gone = new Promise<void>(resolve => exitWaiters.push(resolve))
      child.disconnect()
      await withTimeout(gone, 5_000, 'the receiver did not exit').catch(() => { child.kill('SIGKILL') })
    },
  }
}

/** Thrown by `withTimeout`; callers tell a missed deadline from a failure by its class. */
export class DeadlineError extends Error {
  override name = 'DeadlineError'
}

/** Rejects with a DeadlineError when `promise` has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`${message} (after ${ms} ms)`)), ms)
    // A deadline alone never keeps the process alive: whatever it guards does, while it is pending.
    timer.unref()
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { SQSEvent } from 'aws-lambda'
import type { EventSource } from './deployment.js'
import type { FromProducer, InvokeReply, Load, ProducerRequest } from './producer.js'
import { withTimeout } from './receiverProcess.js'

export type { Load } from './producer.js'

/** The parent's side of the producer process (bench/producer.ts): the latency rows' load, SQS emulator and event source. */
export type ProducerProcess = {
  /** The emulator's endpoint, for the parent's SQS client (the handler's continuation signals). */
  endpoint: string
  /** Gives the producer its own deps (pool, SQS client) over the database the handler drains. */
  init(databaseUrl: string): Promise<void>
  createQueue(name: string): Promise<string>
  /** Sends `requests` enqueue requests of `perRequest` events, one every `intervalMs` from the start, signalling `queueUrl`; rejects after `timeoutMs`. */
  load(opts: { queueUrl: string; project: string; requests: number; perRequest: number; intervalMs: number }, timeoutMs: number): Promise<Load>
  /**
   * Starts the event source (bench/eventSource.ts) on `queueUrl` in the producer. Each batch it
   * receives comes here to `invoke`, and what that resolves with (or its error, as a failed
   * invocation) goes back to the poller, which settles the batch by it.
   */
  startPoller(opts: { queueUrl: string; queueArn: string; source: EventSource }, invoke: (event: SQSEvent) => Promise<unknown>): Promise<Poller>
  /** This process's CPU time so far, microseconds (the emulator's, the load's and the event source's together). */
  cpuMicros(): Promise<number>
  stop(): Promise<void>
}

export type Poller = {
  /** Stops receiving and waits for the invocations in flight; resolves with the poller's warnings and errors. */
  stop(): Promise<{ problems: number }>
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

const START_TIMEOUT_MS = 20_000
const REPLY_TIMEOUT_MS = 10_000
/** Past the producer's own bound on an invocation (the timeout plus its margin), so that one answers first. */
const STOP_MARGIN_MS = 20_000

/** Forks bench/producer.ts under tsx and waits until its emulator listens. */
export async function startProducerProcess(): Promise<ProducerProcess> {
  const child = fork(fileURLToPath(new URL('./producer.ts', import.meta.url)), [], {
    // The child runs TypeScript the way the parent does: through tsx's loader, resolved from here.
    execArgv: ['--import', import.meta.resolve('tsx')],
    env: { ...process.env, BENCH_PRODUCER: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  let nextId = 0
  const replies = new Map<number, (m: FromProducer) => void>()
  const invokers = new Map<number, (event: SQSEvent) => Promise<unknown>>()
  let exited = false
  const gone = new Promise<void>(resolve => child.once('exit', () => { exited = true; resolve() }))
  // The producer's wait for the answer is bounded (bench/producer.ts); a failed send means it is gone.
  const answer = (reply: InvokeReply) => { if (!exited) child.send(reply, () => {}) }
  child.on('message', (m: FromProducer) => {
    if (m.type === 'listening') return
    if (m.type === 'invoke') {
      const invoke = invokers.get(m.poller)
      if (!invoke) return answer({ type: 'invokeFailed', id: m.id, error: `no poller ${m.poller} here` })
      void invoke(m.event).then(
        result => answer({ type: 'invoked', id: m.id, result }),
        (error: unknown) => answer({ type: 'invokeFailed', id: m.id, error: error instanceof Error ? error.message : String(error) }),
      )
      return
    }
    replies.get(m.id)?.(m)
    replies.delete(m.id)
  })
  const stop = async () => {
    if (exited) return
    child.disconnect()
    await withTimeout(gone, 5_000, 'the producer did not exit').catch(() => { child.kill('SIGKILL') })
  }

  let port: number
  try {
    port = await withTimeout(new Promise<number>((resolve, reject) => {
      child.on('message', (m: FromProducer) => { if (m.type === 'listening') resolve(m.port) })
      child.once('exit', code => reject(new Error(`the producer exited with code ${code} before listening`)))
    }), START_TIMEOUT_MS, 'the producer did not start listening')
  } catch (error) {
    if (!exited) child.kill('SIGKILL')
    throw error
  }

  const ask = async <T extends FromProducer['type']>(m: DistributiveOmit<ProducerRequest, 'id'>, expect: T, timeoutMs = REPLY_TIMEOUT_MS, id = ++nextId): Promise<Extract<FromProducer, { type: T }>> => {
    const reply = await withTimeout(new Promise<FromProducer>(resolve => {
      replies.set(id, resolve)
      child.send({ ...m, id })
    }), timeoutMs, `the producer did not answer "${m.type}"`).finally(() => replies.delete(id))
    if (reply.type === 'failed') throw new Error(`the producer failed "${m.type}": ${reply.error}`)
    if (!isType(reply, expect)) throw new Error(`the producer answered ${reply.type} to ${m.type}`)
    return reply
  }

  return {
    endpoint: `http://127.0.0.1:${port}`,
    init: async databaseUrl => { await ask({ type: 'init', databaseUrl }, 'ready') },
    createQueue: async name => (await ask({ type: 'queue', name }, 'queue')).queueUrl,
    load: async (opts, timeoutMs) => (await ask({ type: 'load', ...opts }, 'loaded', timeoutMs)).load,
    startPoller: async (opts, invoke) => {
      // The poll request's id names the poller in its invocations; the invoker is in place before the first.
      const poller = ++nextId
      invokers.set(poller, invoke)
      try {
        await ask({ type: 'poll', ...opts }, 'polling', REPLY_TIMEOUT_MS, poller)
      } catch (error) {
        invokers.delete(poller)
        throw error
      }
      return {
        stop: async () => {
          try {
            // Stopping waits for the invocations in flight, each bounded by the timeout plus a margin there.
            const { problems } = await ask({ type: 'unpoll', poller }, 'unpolled', opts.source.timeoutMs + STOP_MARGIN_MS)
            return { problems }
          } finally {
            invokers.delete(poller)
          }
        },
      }
    },
    cpuMicros: async () => (await ask({ type: 'cpu' }, 'cpu')).micros,
    stop,
  }
}

function isType<T extends FromProducer['type']>(m: FromProducer, type: T): m is Extract<FromProducer, { type: T }> {
  return m.type === type
}

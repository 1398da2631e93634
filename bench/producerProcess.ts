import type { SQSEvent } from 'aws-lambda'
import { forkChild } from './child.js'
import type { EventSource } from './deployment.js'
import type { FromProducer, InvokeReply, Load, ProducerRequest } from './producer.js'

export type { Load } from './producer.js'

/** The parent's side of the producer process (bench/producer.ts): the latency rows' load, SQS emulator and event source. */
export type ProducerProcess = {
  /** The emulator's endpoint, for the parent's SQS client (the handler's continuation signals). */
  endpoint: string
  /** Gives the producer its own deps (pool, SQS client) over the database the handler drains. */
  init(databaseUrl: string): Promise<void>
  createQueue(name: string): Promise<string>
  /**
   * Sends `requests` enqueue requests of `perRequest` events, one every `intervalMs` from the start, signalling
   * `queueUrl`, entity ids `firstId`, `firstId + 1`, …; rejects after `timeoutMs`.
   */
  load(
    opts: { queueUrl: string; project: string; requests: number; perRequest: number; intervalMs: number; firstId: number },
    timeoutMs: number,
  ): Promise<Load>
  /**
   * Starts the event source (bench/eventSource.ts) on `queueUrl` in the producer. Each batch it
   * receives comes here to `invoke`, and what that resolves with (or its error, as a failed
   * invocation) goes back to the poller, which settles the batch by it.
   */
  startPoller(
    opts: { queueUrl: string; queueArn: string; source: EventSource },
    invoke: (event: SQSEvent) => Promise<unknown>,
  ): Promise<Poller>
  /** This process's CPU time so far, microseconds (the emulator's, the load's and the event source's together). */
  cpuMicros(): Promise<number>
  stop(): Promise<void>
}

export type Poller = {
  /** Stops receiving and waits for the invocations in flight; resolves with the poller's warnings and errors. */
  stop(): Promise<{ problems: number }>
}

/** Past the producer's own bound on an invocation (the timeout plus its margin), so that one answers first. */
const STOP_MARGIN_MS = 20_000

/** Forks bench/producer.ts under tsx and waits until its emulator listens. */
export async function startProducerProcess(): Promise<ProducerProcess> {
  const invokers = new Map<number, (event: SQSEvent) => Promise<unknown>>()
  // The producer's wait for the answer is bounded (bench/producer.ts).
  const answer = (reply: InvokeReply) => child.post(reply)
  const child = forkChild<ProducerRequest, FromProducer>(
    new URL('./producer.ts', import.meta.url),
    { BENCH_PRODUCER: '1' },
    'the producer',
    m => {
      if (m.type !== 'invoke') return false
      const invoke = invokers.get(m.poller)
      if (!invoke) answer({ type: 'invokeFailed', id: m.id, error: `no poller ${m.poller} here` })
      else {
        void invoke(m.event).then(
          result => answer({ type: 'invoked', id: m.id, result }),
          (error: unknown) => answer({ type: 'invokeFailed', id: m.id, error: error instanceof Error ? error.message : String(error) }),
        )
      }
      return true
    },
  )
  const port = await child.first(m => (m.type === 'listening' ? m.port : undefined), 'start listening')

  const ask = async <T extends FromProducer['type']>(
    m: Parameters<typeof child.ask>[0],
    expect: T,
    timeoutMs?: number,
    id?: number,
  ): Promise<Extract<FromProducer, { type: T }>> => {
    const reply = await child.ask(m, timeoutMs, id)
    if (reply.type === 'failed') throw new Error(`the producer failed "${m.type}": ${reply.error}`)
    if (!isType(reply, expect)) throw new Error(`the producer answered ${reply.type} to ${m.type}`)
    return reply
  }

  return {
    endpoint: `http://127.0.0.1:${port}`,
    init: async databaseUrl => {
      await ask({ type: 'init', databaseUrl }, 'ready')
    },
    createQueue: async name => (await ask({ type: 'queue', name }, 'queue')).queueUrl,
    load: async (opts, timeoutMs) => (await ask({ type: 'load', ...opts }, 'loaded', timeoutMs)).load,
    startPoller: async (opts, invoke) => {
      // The poll request's id names the poller in its invocations; the invoker is in place before the first.
      const poller = child.nextId()
      invokers.set(poller, invoke)
      try {
        await ask({ type: 'poll', ...opts }, 'polling', undefined, poller)
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
    stop: child.stop,
  }
}

function isType<T extends FromProducer['type']>(m: FromProducer, type: T): m is Extract<FromProducer, { type: T }> {
  return m.type === type
}

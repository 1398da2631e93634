import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { FromProducer, Load, ToProducer } from './producer.js'
import { withTimeout } from './receiverProcess.js'

export type { Load } from './producer.js'

/** The parent's side of the producer process (bench/producer.ts): the latency rows' load and SQS emulator. */
export type ProducerProcess = {
  /** The emulator's endpoint, for the parent's SQS clients (the poller's, the handler's signals). */
  endpoint: string
  /** Gives the producer its own deps (pool, SQS client) over the database the handler drains. */
  init(databaseUrl: string): Promise<void>
  createQueue(name: string): Promise<string>
  /** Sends `requests` enqueue requests of `perRequest` events, one every `intervalMs` from the start, signalling `queueUrl`; rejects after `timeoutMs`. */
  load(opts: { queueUrl: string; project: string; requests: number; perRequest: number; intervalMs: number }, timeoutMs: number): Promise<Load>
  /** This process's CPU time so far, microseconds (the emulator's and the load's together). */
  cpuMicros(): Promise<number>
  stop(): Promise<void>
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

const START_TIMEOUT_MS = 20_000
const REPLY_TIMEOUT_MS = 10_000

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
  let exited = false
  const gone = new Promise<void>(resolve => child.once('exit', () => { exited = true; resolve() }))
  child.on('message', (m: FromProducer) => {
    if (m.type === 'listening') return
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

  const ask = async <T extends FromProducer['type']>(m: DistributiveOmit<ToProducer, 'id'>, expect: T, timeoutMs = REPLY_TIMEOUT_MS): Promise<Extract<FromProducer, { type: T }>> => {
    const id = ++nextId
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
    cpuMicros: async () => (await ask({ type: 'cpu' }, 'cpu')).micros,
    stop,
  }
}

function isType<T extends FromProducer['type']>(m: FromProducer, type: T): m is Extract<FromProducer, { type: T }> {
  return m.type === type
}

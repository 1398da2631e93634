/**
 * The latency rows' AWS side, run in its own process (bench/producerProcess.ts forks it): the paced
 * `enqueue` loop with its own Postgres pool and SQS client, as the enqueue Lambda has; the fauxqs SQS
 * emulator standing in for AWS's service; and the dispatch function's event source mapping (the
 * poller, bench/eventSource.ts), which AWS runs, not the dispatch Lambda. Each invocation is a round
 * trip to the parent, which runs the dispatch handler and nothing else of the latency path.
 */
import './quiet.js'
import type { SQSClient } from '@aws-sdk/client-sqs'
import type { SQSEvent } from 'aws-lambda'
import { startFauxqs } from 'fauxqs'
import { loadConfig } from '../lib/config.js'
import { closeDeps, createDeps, createSqsClient, type Deps } from '../lib/deps.js'
import { enqueue } from '../lib/enqueue.js'
import { createSignals } from '../lib/signals.js'
import { request } from './actions.js'
import { now } from './clock.js'
import type { EventSource } from './deployment.js'
import { startEventSource } from './eventSource.js'
import { articlePayload } from './jobs.js'
import { withTimeout } from './child.js'

/** Parent → producer: requests, each answered by a FromProducer with the same id. */
export type ProducerRequest =
  | { type: 'init'; id: number; databaseUrl: string }
  | { type: 'queue'; id: number; name: string }
  | {
      type: 'load'
      id: number
      queueUrl: string
      project: string
      requests: number
      perRequest: number
      intervalMs: number
      firstId: number
    }
  | { type: 'cpu'; id: number }
  /** Starts the event source on `queueUrl`; its invocations name this request's id as their `poller`. */
  | { type: 'poll'; id: number; queueUrl: string; queueArn: string; source: EventSource }
  | { type: 'unpoll'; id: number; poller: number }

/** The parent's answer to an `invoke`, with its id: the handler's result (the batch item failures) or its error. */
export type InvokeReply = { type: 'invoked'; id: number; result: unknown } | { type: 'invokeFailed'; id: number; error: string }

/** Parent → producer. */
export type ToProducer = ProducerRequest | InvokeReply

/** What one paced load did; `t0` is epoch ms (bench/clock.ts), comparable with the receiver's arrivals. */
export type Load = { t0: number; enqueueErrors: number }

/** Producer → parent: every message but `listening` answers the request with the same id. */
export type FromProducer =
  | { type: 'listening'; port: number }
  | { type: 'ready'; id: number }
  | { type: 'queue'; id: number; queueUrl: string }
  | { type: 'loaded'; id: number; load: Load }
  | { type: 'cpu'; id: number; micros: number }
  | { type: 'polling'; id: number }
  /** `problems`: the poller's warnings and errors (failed receives, failed invocations). */
  | { type: 'unpolled'; id: number; problems: number }
  | { type: 'failed'; id: number; error: string }
  /** Not an answer: the event source invoking the handler; the parent answers with an InvokeReply of this id. */
  | { type: 'invoke'; id: number; poller: number; event: SQSEvent }

const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' }

/** An invocation's answer may take the function's timeout; past it and this margin (IPC, a busy parent) it counts as failed. */
const INVOKE_MARGIN_MS = 10_000

/** What the producer keeps between requests: its emulator, the enqueue deps once initialised, the running pollers. */
type Producer = {
  endpoint: string
  fauxqs: Awaited<ReturnType<typeof startFauxqs>>
  deps?: Deps
  sqs?: SQSClient
  pollers: Map<number, { stop(): Promise<number> }>
  invoke: (poller: number, event: SQSEvent, timeoutMs: number) => Promise<unknown>
}

/**
 * Invocations of the handler in the parent over IPC: `invoke` rejects (a failed invocation, to the
 * poller) on the parent's error or past its bound; `answer` settles one with the parent's reply.
 */
function createInvoker(send: (m: FromProducer) => void) {
  let nextInvoke = 0
  const invocations = new Map<number, (reply: InvokeReply) => void>()
  const invoke = async (poller: number, event: SQSEvent, timeoutMs: number): Promise<unknown> => {
    const id = ++nextInvoke
    const reply = await withTimeout(
      new Promise<InvokeReply>(resolve => {
        invocations.set(id, resolve)
        send({ type: 'invoke', id, poller, event })
      }),
      timeoutMs + INVOKE_MARGIN_MS,
      'the dispatch handler did not answer',
    ).finally(() => invocations.delete(id))
    if (reply.type === 'invokeFailed') throw new Error(`the dispatch handler failed: ${reply.error}`)
    return reply.result
  }
  // An answer past its bound finds no waiter: that invocation already counted as failed.
  const answer = (reply: InvokeReply) => invocations.get(reply.id)?.(reply)
  return { invoke, answer }
}

async function main(send: (m: FromProducer) => void): Promise<void> {
  const fauxqs = await startFauxqs({ port: 0, logger: false })
  const invoker = createInvoker(send)
  const producer: Producer = { endpoint: `http://127.0.0.1:${fauxqs.port}`, fauxqs, pollers: new Map(), invoke: invoker.invoke }
  process.on('message', (m: ToProducer) => {
    if (m.type === 'invoked' || m.type === 'invokeFailed') return void invoker.answer(m)
    void handle(producer, m).then(send, (error: unknown) =>
      send({ type: 'failed', id: m.id, error: error instanceof Error ? error.message : String(error) }),
    )
  })
  // The parent going away (even killed) closes the IPC channel; the producer must not outlive it.
  process.on('disconnect', () => {
    const { pollers, deps } = producer
    void Promise.allSettled([...[...pollers.values()].map(p => p.stop()), deps ? closeDeps(deps) : undefined, fauxqs.stop()]).finally(() =>
      process.exit(0),
    )
  })
  send({ type: 'listening', port: fauxqs.port })
}

/** One request of the parent, answered. */
async function handle(p: Producer, m: ProducerRequest): Promise<FromProducer> {
  switch (m.type) {
    case 'init': {
      // The queue URL is a placeholder: each load sends its signals to the queue of its run.
      const config = loadConfig({
        DATABASE_URL: m.databaseUrl,
        SIGNAL_QUEUE_URL: `${p.endpoint}/000000000000/unused`,
        LOG_LEVEL: 'error',
        WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      })
      // Bounded like the enqueue Lambda's client (lib/deps.ts), pointed at this process's emulator.
      p.sqs = createSqsClient(config, { endpoint: p.endpoint, credentials: CREDENTIALS })
      p.deps = createDeps(config, { sqs: p.sqs })
      return { type: 'ready', id: m.id }
    }
    case 'queue':
      return { type: 'queue', id: m.id, queueUrl: p.fauxqs.createQueue(m.name).queueUrl }
    case 'load': {
      const { deps, sqs } = p
      if (!deps || !sqs) throw new Error('the producer was not initialised')
      // The pool drops idle connections after 30 s, and a full bench reaches these rows minutes after init.
      await warmPool(deps, deps.config.DB_POOL_MAX)
      // Each run's signals go to a queue of its own, so leftovers of earlier runs cannot wake the handler.
      const load = await pacedLoad({ ...deps, signals: createSignals(sqs, m.queueUrl) }, m)
      return { type: 'loaded', id: m.id, load }
    }
    case 'cpu': {
      const usage = process.cpuUsage()
      return { type: 'cpu', id: m.id, micros: usage.user + usage.system }
    }
    case 'poll': {
      const poller = m.id
      const source = { endpoint: p.endpoint, queueUrl: m.queueUrl, queueArn: m.queueArn, source: m.source }
      p.pollers.set(
        poller,
        startEventSource(source, event => p.invoke(poller, event, m.source.timeoutMs)),
      )
      return { type: 'polling', id: m.id }
    }
    case 'unpoll': {
      const poller = p.pollers.get(m.poller)
      if (!poller) throw new Error(`no poller ${m.poller}`)
      p.pollers.delete(m.poller)
      // Waits for the invocations in flight, each bounded by `invoke`.
      return { type: 'unpolled', id: m.id, problems: await poller.stop() }
    }
  }
}

/**
 * Sends `requests` enqueue requests of `perRequest` events, one every `intervalMs`, each event carrying
 * its enqueue time in `values.t` and its own entity id from `firstId` on, and resolves once every request has settled.
 */
async function pacedLoad(
  deps: Deps,
  opts: { project: string; requests: number; perRequest: number; intervalMs: number; firstId: number },
): Promise<Load> {
  const pending = new Set<Promise<unknown>>()
  let enqueueErrors = 0
  const t0 = now()
  for (let r = 0; r < opts.requests; r++) {
    // Paced against the start, not the previous request, so a slow request does not lower the rate.
    const wait = t0 + r * opts.intervalMs - now()
    if (wait > 0) await new Promise(resolve => setTimeout(resolve, wait))
    const t = now()
    const payloads = Array.from({ length: opts.perRequest }, (_, j) => articlePayload(opts.firstId + r * opts.perRequest + j, t))
    const p = enqueue(deps, request(opts.project, payloads)).catch(() => {
      enqueueErrors++
    })
    pending.add(p)
    void p.finally(() => pending.delete(p))
  }
  // Every enqueue is bounded (the pool's statement timeout, the SQS client's request timeout).
  await Promise.all(pending)
  return { t0, enqueueErrors }
}

/** Opens the pool's connections before a run, as warm enqueue environments have them. */
async function warmPool(deps: Deps, size: number): Promise<void> {
  const clients = await Promise.all(Array.from({ length: size }, () => deps.db.connect()))
  for (const c of clients) c.release()
}

// Only the forked child serves: tsx itself may give the parent an IPC channel too.
const ipcSend = process.send?.bind(process)
if (process.env.BENCH_PRODUCER === '1' && ipcSend) {
  main(m => {
    ipcSend(m)
  }).catch((error: unknown) => {
    process.stderr.write(`bench producer failed to start: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}

/**
 * The latency rows' load and SQS, run in their own process (bench/producerProcess.ts forks it): the
 * paced `enqueue` loop with its own Postgres pool and SQS client, as the enqueue Lambda has, and the
 * fauxqs SQS emulator standing in for AWS's service. The bench process keeps only what the deployment
 * runs for dispatch (the event source's poller and the dispatch handler), so the load and the emulator
 * no longer take that process's CPU.
 */
import './quiet.js'
import type { SQSClient } from '@aws-sdk/client-sqs'
import { startFauxqs } from 'fauxqs'
import { loadConfig } from '../lib/config.js'
import { closeDeps, createDeps, createSqsClient, type Deps } from '../lib/deps.js'
import { enqueue } from '../lib/enqueue.js'
import { createSignals } from '../lib/signals.js'
import { request } from './actions.js'
import { now } from './clock.js'
import { articlePayload } from './jobs.js'

/** Parent → producer. */
export type ToProducer =
  | { type: 'init'; id: number; databaseUrl: string }
  | { type: 'queue'; id: number; name: string }
  | { type: 'load'; id: number; queueUrl: string; project: string; requests: number; perRequest: number; intervalMs: number }
  | { type: 'cpu'; id: number }

/** What one paced load did; `t0` is epoch ms (bench/clock.ts), comparable with the receiver's arrivals. */
export type Load = { t0: number; enqueueErrors: number }

/** Producer → parent: every message but `listening` answers the request with the same id. */
export type FromProducer =
  | { type: 'listening'; port: number }
  | { type: 'ready'; id: number }
  | { type: 'queue'; id: number; queueUrl: string }
  | { type: 'loaded'; id: number; load: Load }
  | { type: 'cpu'; id: number; micros: number }
  | { type: 'failed'; id: number; error: string }

const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' }

async function main(send: (m: FromProducer) => void): Promise<void> {
  const fauxqs = await startFauxqs({ port: 0, logger: false })
  const endpoint = `http://127.0.0.1:${fauxqs.port}`
  let deps: Deps | undefined
  let sqs: SQSClient | undefined

  const handle = async (m: ToProducer): Promise<FromProducer> => {
    switch (m.type) {
      case 'init': {
        // The queue URL is a placeholder: each load sends its signals to the queue of its run.
        const config = loadConfig({ DATABASE_URL: m.databaseUrl, SIGNAL_QUEUE_URL: `${endpoint}/000000000000/unused`, LOG_LEVEL: 'error', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' })
        // Bounded like the enqueue Lambda's client (lib/deps.ts), pointed at this process's emulator.
        sqs = createSqsClient(config, { endpoint, credentials: CREDENTIALS })
        deps = createDeps(config, { sqs })
        return { type: 'ready', id: m.id }
      }
      case 'queue':
        return { type: 'queue', id: m.id, queueUrl: fauxqs.createQueue(m.name).queueUrl }
      case 'load': {
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
    }
  }

  process.on('message', (m: ToProducer) => {
    void handle(m).then(send, (error: unknown) => send({ type: 'failed', id: m.id, error: error instanceof Error ? error.message : String(error) }))
  })
  // The parent going away (even killed) closes the IPC channel; the producer must not outlive it.
  process.on('disconnect', () => {
    void Promise.allSettled([deps ? closeDeps(deps) : undefined, fauxqs.stop()]).finally(() => process.exit(0))
  })
  send({ type: 'listening', port: fauxqs.port })
}

/**
 * Sends `requests` enqueue requests of `perRequest` events, one every `intervalMs`, each event carrying
 * its enqueue time in `values.t`, and resolves once every request has settled.
 */
async function pacedLoad(deps: Deps, opts: { project: string; requests: number; perRequest: number; intervalMs: number }): Promise<Load> {
  const pending = new Set<Promise<unknown>>()
  let enqueueErrors = 0
  const t0 = now()
  for (let r = 0; r < opts.requests; r++) {
    // Paced against the start, not the previous request, so a slow request does not lower the rate.
    const wait = t0 + r * opts.intervalMs - now()
    if (wait > 0) await new Promise(resolve => setTimeout(resolve, wait))
    const t = now()
    const payloads = Array.from({ length: opts.perRequest }, (_, j) => articlePayload(r * opts.perRequest + j, t))
    const p = enqueue(deps, request(opts.project, payloads)).catch(() => { enqueueErrors++ })
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
  main(m => { ipcSend(m) }).catch((error: unknown) => {
    process.stderr.write(`bench producer failed to start: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}

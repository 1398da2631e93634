/**
 * The webhook receiver, run in its own process (bench/receiverProcess.ts forks it) so that its HTTP
 * work is not billed to the contender being measured. Answers every POST with 200 and an empty body,
 * and counts the events it sees by id: `{ events: [{ meta: { eventId }, values: { t } }] }`, the shape
 * Actions sends and the other contenders are made to send.
 */
import { createServer } from 'node:http'
import { now } from './clock.js'

/** Parent → receiver. `round` ties a later `complete` message to the reset that armed it. */
export type ToReceiver = { type: 'reset'; id: number; round: number; expect: number } | { type: 'read'; id: number; latencies: boolean }

export type Counts = {
  /** Distinct event ids received since the last reset. */
  delivered: number
  /** Deliveries of an id already received. */
  duplicates: number
  requests: number
  /** Enqueue-to-arrival milliseconds of each first delivery that carried `values.t` (only when asked). */
  latencies?: number[]
  /** This process's CPU time so far, microseconds. */
  cpuMicros: number
}

/** Receiver → parent. */
export type FromReceiver =
  | { type: 'listening'; url: string }
  | { type: 'reset'; id: number }
  | { type: 'counts'; id: number; counts: Counts }
  /** Sent once per round, when `expect` distinct ids have arrived; `at` is epoch ms (sub-ms precision). */
  | { type: 'complete'; round: number; at: number }

function main(send: (m: FromReceiver) => void): void {
  let seen = new Set<string>()
  let duplicates = 0
  let requests = 0
  let latencies: number[] = []
  let round = 0
  let expect = Infinity

  const count = (text: string, at: number) => {
    requests++
    for (const event of eventsOf(text)) {
      if (seen.has(event.id)) {
        duplicates++
        continue
      }
      seen.add(event.id)
      if (event.t !== undefined) latencies.push(at - event.t)
    }
    if (seen.size >= expect) {
      send({ type: 'complete', round, at })
      // Only the first arrival of the last event counts; later ones are duplicates, reported by `read`.
      expect = Infinity
    }
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const at = now()
      try {
        count(Buffer.concat(chunks).toString('utf8'), at)
      } catch {
        // A body we cannot read is still answered: the contenders are measured, not this parser.
      }
      res.end()
    })
  })
  // Longer than any contender's idle keep-alive, so connections are reused and never raced by a close.
  server.keepAliveTimeout = 60_000

  process.on('message', (m: ToReceiver) => {
    if (m.type === 'reset') {
      seen = new Set()
      duplicates = 0
      requests = 0
      latencies = []
      round = m.round
      expect = m.expect
      send({ type: 'reset', id: m.id })
    } else {
      const usage = process.cpuUsage()
      send({
        type: 'counts',
        id: m.id,
        counts: { delivered: seen.size, duplicates, requests, cpuMicros: usage.user + usage.system, ...(m.latencies ? { latencies } : {}) },
      })
    }
  })
  // The parent going away (even killed) closes the IPC channel; the receiver must not outlive it.
  process.on('disconnect', () => process.exit(0))
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address()
    const port = typeof addr === 'object' && addr ? addr.port : 0
    send({ type: 'listening', url: `http://127.0.0.1:${port}/hook` })
  })
}

/** Event ids (and enqueue timestamps, when present) of one request body. */
function eventsOf(text: string): Array<{ id: string; t?: number }> {
  const body: unknown = JSON.parse(text)
  const events = isObject(body) && Array.isArray(body.events) ? body.events : []
  const out: Array<{ id: string; t?: number }> = []
  for (const e of events) {
    if (!isObject(e) || !isObject(e.meta) || typeof e.meta.eventId !== 'string') continue
    const t = isObject(e.values) && typeof e.values.t === 'number' ? e.values.t : undefined
    out.push(t === undefined ? { id: e.meta.eventId } : { id: e.meta.eventId, t })
  }
  return out
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

// Only the forked child serves: tsx itself may give the parent an IPC channel too.
const ipcSend = process.send?.bind(process)
if (process.env.BENCH_RECEIVER === '1' && ipcSend)
  main(m => {
    ipcSend(m)
  })

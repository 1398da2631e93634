/**
 * The OTLP/HTTP collector of the traced row (`actions-b1-traced`), run in its own process so that what
 * it spends taking spans is not billed to the dispatcher: reads each POST body fully, counts the spans
 * in it (OTLP JSON: resourceSpans[].scopeSpans[].spans[]) and answers 200 `{}`, as a collector that
 * accepted everything does. The parent's side is {@link startCollectorProcess}.
 */
import { createServer } from 'node:http'
import { forkChild } from './child.js'

/** What the collector took since its last reset. */
export type CollectorCounts = { requests: number; spans: number; bytes: number; cpuMicros: number }

type ToCollector = { type: 'reset'; id: number } | { type: 'read'; id: number }
type FromCollector =
  { type: 'listening'; url: string } | { type: 'reset'; id: number } | { type: 'counts'; id: number; counts: CollectorCounts }

/** The parent's side of the collector process. */
export type CollectorProcess = {
  /** The base URL to set as OTEL_EXPORTER_OTLP_ENDPOINT (`/v1/traces` is appended by the exporter). */
  url: string
  reset(): Promise<void>
  counts(): Promise<CollectorCounts>
  stop(): Promise<void>
}

/** Forks this file as the collector and waits until it listens. */
export async function startCollectorProcess(): Promise<CollectorProcess> {
  const child = forkChild<ToCollector, FromCollector>(new URL('./collector.ts', import.meta.url), { BENCH_COLLECTOR: '1' }, 'the collector')
  const url = await child.first(m => (m.type === 'listening' ? m.url : undefined), 'start listening')
  return {
    url,
    reset: async () => {
      await child.ask({ type: 'reset' })
    },
    counts: async () => {
      const reply = await child.ask({ type: 'read' })
      if (reply.type !== 'counts') throw new Error(`unexpected collector reply ${reply.type}`)
      return reply.counts
    },
    stop: child.stop,
  }
}

function serve(send: (m: FromCollector) => void): void {
  let counts = { requests: 0, spans: 0, bytes: 0 }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      counts.requests++
      counts.bytes += body.length
      counts.spans += spansIn(body.toString('utf8'))
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{}')
    })
  })
  server.keepAliveTimeout = 60_000
  process.on('message', (m: ToCollector) => {
    if (m.type === 'reset') {
      counts = { requests: 0, spans: 0, bytes: 0 }
      send({ type: 'reset', id: m.id })
    } else {
      const usage = process.cpuUsage()
      send({ type: 'counts', id: m.id, counts: { ...counts, cpuMicros: usage.user + usage.system } })
    }
  })
  // The parent going away (even killed) closes the IPC channel; the collector must not outlive it.
  process.on('disconnect', () => process.exit(0))
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address()
    const port = typeof addr === 'object' && addr ? addr.port : 0
    send({ type: 'listening', url: `http://127.0.0.1:${port}` })
  })
}

/** Spans in one OTLP JSON export request; 0 for a body that is not one (it is still answered 200). */
function spansIn(text: string): number {
  try {
    const body = JSON.parse(text) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: unknown[] }> }> }
    let n = 0
    for (const r of body.resourceSpans ?? []) for (const s of r.scopeSpans ?? []) n += s.spans?.length ?? 0
    return n
  } catch {
    return 0
  }
}

// Only the forked child serves: the parent imports this file for startCollectorProcess.
const ipcSend = process.send?.bind(process)
if (process.env.BENCH_COLLECTOR === '1' && ipcSend)
  serve(m => {
    ipcSend(m)
  })

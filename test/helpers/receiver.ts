import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** `raw` is the body exactly as received (what a signature covers). */
export type ReceivedRequest = { method: string; path: string; headers: IncomingMessage['headers']; body: any; raw: string; at: number }

/** Decides how the receiver answers one request; the default answers 200 with an empty body. */
export type Responder = (req: ReceivedRequest, res: ServerResponse) => void | Promise<void>

export type Receiver = {
  url: string
  requests: ReceivedRequest[]
  /** Event ids delivered in every request so far, in arrival order. */
  eventIds(): string[]
  respond(responder: Responder): void
  close(): Promise<void>
}

/** A real HTTP server on 127.0.0.1 that records every request and answers as told. */
export async function startReceiver(
  responder: Responder = (_, res) => {
    res.end()
  },
): Promise<Receiver> {
  let current = responder
  const requests: ReceivedRequest[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: text ? JSON.parse(text) : undefined,
        raw: text,
        at: Date.now(),
      }
      requests.push(received)
      void Promise.resolve(current(received, res)).catch(() => res.destroy())
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    eventIds: () => requests.flatMap(eventIdsOf),
    respond: r => {
      current = r
    },
    close: () =>
      new Promise(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The event ids one request delivered, in its order. */
export function eventIdsOf(req: ReceivedRequest): string[] {
  return ((req.body?.events ?? []) as Array<{ meta: { eventId: string } }>).map(e => e.meta.eventId)
}

/**
 * A target in an outage: `respond` answers 503 until `recover()`, then 200, counting every delivery
 * of each event id (so a test can check that each arrived exactly once after the outage).
 */
export function outage(): { respond: Responder; recover(): void; delivered: Map<string, number> } {
  let down = true
  const delivered = new Map<string, number>()
  return {
    delivered,
    recover: () => {
      down = false
    },
    respond: (req, res) => {
      if (down) {
        res.statusCode = 503
        res.end()
        return
      }
      for (const id of eventIdsOf(req)) delivered.set(id, (delivered.get(id) ?? 0) + 1)
      res.end()
    },
  }
}

/** Answers with a JSON body. */
export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** The request's header lines as sent, as [name, value] pairs in order (Node folds `headers`; this does not). */
export function headerLines(res: ServerResponse): Array<[string, string]> {
  const raw = res.req.rawHeaders
  return Array.from({ length: raw.length / 2 }, (_, i): [string, string] => [raw[2 * i] ?? '', raw[2 * i + 1] ?? ''])
}

import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

// The soak's receivers (bench/soak.ts): real HTTP servers on 127.0.0.1 that note, per event id, when it
// was first answered 2xx and how often it arrived, and that can be killed and restarted on their port.

/** How a receiver answers one request. `hang`: never, so the request ends at the target's timeout. */
export type Answer = 'ok' | 'fail' | 'hang'

/** Requests a receiver reads at most at once in bytes: the soak's batches are small; anything larger is refused. */
const MAX_BODY_BYTES = 4 * 1024 * 1024

export type SoakReceiver = {
  url: string
  /** Per event id: deliveries seen (any answer) and when the first 2xx answer went out (ms epoch). */
  seen: Map<string, { arrivals: number; okAt?: number; okCount: number }>
  /** Requests answered, by answer. */
  answers: Record<Answer, number>
  /** Closes the server and every connection (in-flight requests are cut), then listens again on the same port after `downMs`. */
  restart(downMs: number): Promise<void>
  close(): Promise<void>
}

/** Starts a receiver answering each request as `decide` says. */
export async function startSoakReceiver(decide: () => Answer): Promise<SoakReceiver> {
  const seen: SoakReceiver['seen'] = new Map()
  const answers: Record<Answer, number> = { ok: 0, fail: 0, hang: 0 }
  const hanging = new Set<() => void>()
  const make = () =>
    createServer((req, res) => {
      const chunks: Buffer[] = []
      let bytes = 0
      req.on('data', (c: Buffer) => {
        bytes += c.length
        if (bytes > MAX_BODY_BYTES) req.destroy()
        else chunks.push(c)
      })
      req.on('end', () => {
        const ids = eventIds(Buffer.concat(chunks).toString('utf8'))
        for (const id of ids) {
          const s = seen.get(id) ?? { arrivals: 0, okCount: 0 }
          s.arrivals++
          seen.set(id, s)
        }
        const answer = decide()
        answers[answer]++
        if (answer === 'hang') {
          // Held until the client gives up (its timeout) or the server restarts.
          const end = () => res.destroy()
          hanging.add(end)
          res.on('close', () => hanging.delete(end))
          return
        }
        if (answer === 'fail') {
          res.statusCode = 500
          res.end()
          return
        }
        const now = Date.now()
        for (const id of ids) {
          const s = seen.get(id)
          if (!s) continue
          s.okCount++
          s.okAt ??= now
        }
        res.end()
      })
    })
  let server: Server = make()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const shut = (s: Server) =>
    new Promise<void>(resolve => {
      for (const end of hanging) end()
      s.closeAllConnections()
      s.close(() => resolve())
    })
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    answers,
    restart: async downMs => {
      await shut(server)
      await new Promise(r => setTimeout(r, downMs))
      server = make()
      await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
    },
    close: () => shut(server),
  }
}

/** The event ids of a delivered body `{ events: [{ meta: { eventId } }] }`; none when it is not one. */
function eventIds(text: string): string[] {
  try {
    const body: unknown = JSON.parse(text)
    if (typeof body !== 'object' || body === null || !('events' in body) || !Array.isArray(body.events)) return []
    return body.events.flatMap((e: unknown) =>
      typeof e === 'object' &&
      e !== null &&
      'meta' in e &&
      typeof e.meta === 'object' &&
      e.meta !== null &&
      'eventId' in e.meta &&
      typeof e.meta.eventId === 'string'
        ? [e.meta.eventId]
        : [],
    )
  } catch {
    return []
  }
}

import { Pool } from 'undici'
import { eventJob } from './jobs.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

/** Connections of the ceiling client: one per request in flight, as every contender runs 8. */
const CONNECTIONS = 8

/** What the ceiling row does, for the table. */
export const BARE_LABEL = `undici Pool(${CONNECTIONS}), 1 event/POST, body built per request (ceiling)`

/**
 * The ceiling of one process at one event per POST: the cheapest client that still sends the bytes a
 * contender sends over keep-alive. One undici `Pool` of 8 connections to the receiver; per request it
 * builds the event (as `eventJob` does for the job queues), serializes `{ events: [event] }`, calls
 * `Pool.request` and `body.dump()`. No queue, no timeout timer, no URL parsing, no status bookkeeping
 * beyond counting non-2xx answers: anything cheaper would no longer send the same request.
 */
export function setupBareClient(receiverUrl: string, ctx: TimedContext) {
  const url = new URL(receiverUrl)
  const pool = new Pool(url.origin, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 30_000 })
  return {
    deliver: (n: number): Promise<RunResult> => timedDelivery(ctx, n, async () => {
      let next = 0
      let failed = 0
      const finished = Promise.all(Array.from({ length: CONNECTIONS }, async () => {
        for (let i = next++; i < n; i = next++) {
          const res = await pool.request({ origin: url.origin, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: [eventJob(i)] }) })
          await res.body.dump()
          if (res.statusCode < 200 || res.statusCode >= 300) failed++
        }
      }))
      return { finished, stop: async () => { await finished; return failed === 0 } }
    }),
    close: () => pool.close(),
  }
}

import { Pool, type Dispatcher } from 'undici'
import { eventJob } from './jobs.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

/** Connections of the ceiling client: one per request in flight, as every contender runs 8. */
const CONNECTIONS = 8

/** What the ceiling row does, for the table. */
export const BARE_LABEL = `undici Pool(${CONNECTIONS}).dispatch, 1 event/POST, body built per request (ceiling)`

/**
 * The ceiling of one process at one event per POST: the cheapest client that still sends the bytes a
 * contender sends over keep-alive. One undici `Pool` of 8 connections to the receiver; per request it
 * builds the event (as `eventJob` does for the job queues), serializes `{ events: [event] }` and hands
 * it to `Pool.dispatch` with a handler that keeps the status and discards the answer (undici's lowest
 * public API: no response stream to create and drain; 5-10% less CPU per request than
 * `Pool.request` + `body.dump()`, bench/README.md). No queue, no timeout timer, no URL parsing, no
 * status bookkeeping beyond counting non-2xx answers: anything cheaper would no longer send the same
 * request.
 */
export function setupBareClient(receiverUrl: string, ctx: TimedContext) {
  const url = new URL(receiverUrl)
  const pool = new Pool(url.origin, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 30_000 })
  return {
    deliver: (n: number): Promise<RunResult> =>
      timedDelivery(ctx, n, async () => {
        let next = 0
        let failed = 0
        const finished = Promise.all(
          Array.from({ length: CONNECTIONS }, async () => {
            for (let i = next++; i < n; i = next++) {
              const status = await dispatchPost(pool, {
                origin: url.origin,
                path: url.pathname,
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ events: [eventJob(i)] }),
              })
              if (status < 200 || status >= 300) failed++
            }
          }),
        )
        return {
          finished,
          stop: async () => {
            await finished
            return failed === 0
          },
        }
      }),
    close: () => pool.close(),
  }
}

/** One request through the dispatch API; resolves with the final status once the answer has been read (and dropped). */
export function dispatchPost(pool: Pool, options: Dispatcher.DispatchOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    let status = 0
    pool.dispatch(options, {
      // Its presence marks the handler as undici 7's (controller) API; nothing to do at the start.
      onRequestStart() {},
      onResponseStart(_controller, statusCode) {
        status = statusCode
      },
      onResponseEnd() {
        resolve(status)
      },
      onResponseError(_controller, error) {
        reject(error)
      },
    })
  })
}

import { createPoster, eventJob } from './jobs.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

/**
 * The ceiling of one process: a keep-alive undici client POSTing one event per request, 8 in flight,
 * with no queue behind it. Every contender's batchSize-1 number is bounded by this on the same machine.
 */
export function setupBareClient(receiverUrl: string, ctx: TimedContext) {
  const poster = createPoster(receiverUrl)
  return {
    deliver: (n: number): Promise<RunResult> => {
      const jobs = Array.from({ length: n }, (_, i) => eventJob(i))
      return timedDelivery(ctx, n, async () => {
        let next = 0
        const finished = Promise.all(Array.from({ length: 8 }, async () => {
          for (let i = next++; i < jobs.length; i = next++) await poster.post([jobs[i]])
        }))
        return { finished, stop: async () => { await finished; return true } }
      })
    },
    close: () => poster.close(),
  }
}

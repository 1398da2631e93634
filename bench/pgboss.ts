import PgBoss from 'pg-boss'
import pg from 'pg'
import { createPool } from '../lib/db/pool.js'
import { createPoster, eventJob } from './jobs.js'
import { pollUntil, timedDelivery, type RunResult, type TimedContext } from './timed.js'

/** How pg-boss is worked: `workers` calls of `work()`, each fetching `batchSize` jobs per poll. */
export type PgBossMode = { label: string; workers: number; batchSize: number }

/**
 * pg-boss 10 has no teamSize: one `work()` call is one loop that fetches a batch, awaits the handler, and
 * then sleeps out the rest of the polling interval (0.5 s at least) even when more jobs wait. Eight
 * workers, each POSTing its batch one job at a time, give 8 requests in flight, and throughput is capped
 * at workers × batchSize / 0.5 s until the batches are large enough to outlast the interval. The bench
 * runs several batch sizes (bench/options.ts: 250, 1000, 2500; BENCH_PGBOSS_BATCH to change) and compares
 * with the best of them in that run.
 */
export const pgbossModes = (batchSizes: readonly number[]): PgBossMode[] =>
  batchSizes.map(batchSize => ({ label: `8 workers, batchSize ${batchSize}`, workers: 8, batchSize }))

const POLL_SECONDS = 0.5
const INSERT_CHUNK = 5_000
const COMPLETION_TIMEOUT_MS = 30_000

export type PgBossBench = {
  deliver(mode: PgBossMode, n: number): Promise<RunResult>
  close(): Promise<void>
}

/** pg-boss over a fresh database; `start()` installs its schema. */
export async function setupPgBoss(url: string, receiverUrl: string, ctx: TimedContext): Promise<PgBossBench> {
  const pool = createPool(url, 10)
  let statements = 0
  // Our pool behind pg-boss's `db` hook, so every statement it sends is counted.
  const boss = new PgBoss({
    db: {
      executeSql: (text, values) => {
        statements++
        return pool.query(text, values)
      },
    },
    // The background maintenance and cron loops would only add noise to a throughput run.
    supervise: false,
    schedule: false,
  })
  boss.on('error', () => {})
  await boss.start()
  const check = new pg.Pool({ connectionString: url, max: 1 })
  const poster = createPoster(receiverUrl)
  let queues = 0

  return {
    deliver: async (mode, n) => {
      // A queue per run: pg-boss 10 gives each queue its own partition, so every run starts from an empty one.
      const queue = `deliver_${++queues}`
      await boss.createQueue(queue)
      for (let i = 0; i < n; i += INSERT_CHUNK) {
        await boss.insert(Array.from({ length: Math.min(INSERT_CHUNK, n - i) }, (_, j) => ({ name: queue, data: eventJob(i + j) })))
      }
      await check.query('VACUUM ANALYZE pgboss.job')
      const completed = async () =>
        (await check.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`, [queue]))
          .rows[0]?.n ?? -1
      return timedDelivery(
        ctx,
        n,
        async () => {
          for (let w = 0; w < mode.workers; w++) {
            await boss.work<Record<string, unknown>>(
              queue,
              { batchSize: mode.batchSize, pollingIntervalSeconds: POLL_SECONDS },
              async jobs => {
                // One POST per job, as the others do; a failure fails the batch, which pg-boss retries.
                for (const job of jobs) await poster.post([job.data])
              },
            )
          }
          return {
            stop: async () => {
              const done = await pollUntil(async () => (await completed()) === n, COMPLETION_TIMEOUT_MS)
              await boss.offWork(queue)
              return done
            },
          }
        },
        {
          reset: () => {
            statements = 0
          },
          count: () => statements,
        },
      )
    },
    close: async () => {
      await boss.stop({ graceful: false, close: false, timeout: 5_000 })
      await poster.close()
      await check.end()
      await pool.end()
    },
  }
}

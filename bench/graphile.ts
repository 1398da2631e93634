import { Logger, makeWorkerUtils, run, type RunnerOptions } from 'graphile-worker'
import pg from 'pg'
import { createPool } from '../lib/db/pool.js'
import { countStatements } from './statements.js'
import { createPoster, eventJob } from './jobs.js'
import { pollUntil, timedDelivery, type RunResult, type TimedContext } from './timed.js'

/** How graphile-worker is run: its defaults, or with the batching features of its performance guide. */
export type GraphileMode = {
  label: string
  /** `worker.localQueue.size`: jobs fetched (and locked) per query and handed out locally. */
  localQueueSize?: number
  /** `worker.completeJobBatchDelay` / `failJobBatchDelay`: completions and failures written in batches. */
  batchDelayMs?: number
}

export const GRAPHILE_MODES: GraphileMode[] = [
  { label: 'defaults (run, concurrency 8)' },
  { label: 'localQueue 500, completeJobBatchDelay 0', localQueueSize: 500, batchDelayMs: 0 },
]

const CONCURRENCY = 8
// Graphile's advice: max(10, concurrency + 2) connections.
const POOL_SIZE = Math.max(10, CONCURRENCY + 2)
const ADD_JOBS_CHUNK = 5_000
const COMPLETION_TIMEOUT_MS = 30_000

const silent = new Logger(() => () => {})

export type GraphileBench = {
  deliver(mode: GraphileMode, n: number): Promise<RunResult>
  close(): Promise<void>
}

/** graphile-worker over a fresh database; its schema is installed by its own migrations. */
export async function setupGraphile(url: string, receiverUrl: string, ctx: TimedContext): Promise<GraphileBench> {
  // Our pool, handed to graphile-worker, so its statements can be counted like Actions' are.
  const pool = createPool(url, POOL_SIZE)
  // graphile-worker insists that every client has an error handler (it warns otherwise); createPool only guards the pool.
  pool.on('connect', client => {
    client.on('error', () => {})
  })
  const statements = countStatements(pool)
  const check = new pg.Pool({ connectionString: url, max: 1 })
  const utils = await makeWorkerUtils({ pgPool: pool, logger: silent })
  await utils.migrate()
  const poster = createPoster(receiverUrl)
  const remaining = async () =>
    (await check.query<{ n: number }>('SELECT count(*)::int AS n FROM graphile_worker._private_jobs')).rows[0]?.n ?? -1

  return {
    deliver: async (mode, n) => {
      await check.query('TRUNCATE graphile_worker._private_jobs')
      for (let i = 0; i < n; i += ADD_JOBS_CHUNK) {
        await utils.addJobs(
          Array.from({ length: Math.min(ADD_JOBS_CHUNK, n - i) }, (_, j) => ({ identifier: 'deliver', payload: eventJob(i + j) })),
        )
      }
      await check.query('VACUUM ANALYZE graphile_worker._private_jobs')
      return timedDelivery(
        ctx,
        n,
        async () => {
          const options: RunnerOptions = {
            pgPool: pool,
            concurrency: CONCURRENCY,
            logger: silent,
            noHandleSignals: true,
            // No crontab: otherwise it looks for a ./crontab file.
            crontab: '',
            taskList: {
              deliver: async payload => {
                await poster.post([payload])
              },
            },
            ...(mode.localQueueSize
              ? {
                  preset: {
                    worker: {
                      localQueue: { size: mode.localQueueSize },
                      completeJobBatchDelay: mode.batchDelayMs ?? -1,
                      failJobBatchDelay: mode.batchDelayMs ?? -1,
                    },
                  },
                }
              : {}),
          }
          const runner = await run(options)
          return {
            stop: async () => {
              // Done means the queue agrees: every job completed (deleted), not just POSTed.
              const done = await pollUntil(async () => (await remaining()) === 0, COMPLETION_TIMEOUT_MS)
              await runner.stop()
              return done
            },
          }
        },
        statements,
      )
    },
    close: async () => {
      await utils.release()
      await poster.close()
      await check.end()
      await pool.end()
    },
  }
}

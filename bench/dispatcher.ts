/**
 * One dispatch process of the scale-out rows (bench/scale.ts forks several): its own dependencies
 * (pool, HTTP agent), as one dispatch Lambda environment has, draining the projects it is told to
 * through `drainProject`, against the same Postgres and receiver as its siblings.
 */
import './quiet.js'
import { SQSClient } from '@aws-sdk/client-sqs'
import { loadConfig } from '../lib/config.js'
import { closeDeps, createDeps, type Deps } from '../lib/deps.js'
import { drainProject } from '../lib/dispatch/drain.js'
import { countStatements } from './statements.js'

/** Parent → dispatcher. */
export type ToDispatcher =
  | { type: 'init'; id: number; databaseUrl: string; sqsEndpoint: string; queueUrl: string }
  | { type: 'drain'; id: number; projects: string[] }
  | { type: 'cpu'; id: number }

/** Dispatcher → parent: every message answers the request with the same id. */
export type FromDispatcher =
  | { type: 'ready'; id: number }
  | { type: 'drained'; id: number; succeeded: number; statements: number; error?: string }
  | { type: 'cpu'; id: number; micros: number }

function main(send: (m: FromDispatcher) => void): void {
  let deps: Deps | undefined
  let statements: ReturnType<typeof countStatements> | undefined
  process.on('message', (m: ToDispatcher) => {
    if (m.type === 'init') {
      const sqs = new SQSClient({
        endpoint: m.sqsEndpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      })
      deps = createDeps(
        loadConfig({
          DATABASE_URL: m.databaseUrl,
          SIGNAL_QUEUE_URL: m.queueUrl,
          DISPATCH_CONCURRENCY: '8',
          LOG_LEVEL: 'error',
          WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
        }),
        { sqs },
      )
      statements = countStatements(deps.db)
      send({ type: 'ready', id: m.id })
    } else if (m.type === 'drain') {
      void drainAll(m.projects).then(
        succeeded => send({ type: 'drained', id: m.id, succeeded, statements: statements?.count() ?? 0 }),
        (error: unknown) =>
          send({
            type: 'drained',
            id: m.id,
            succeeded: 0,
            statements: statements?.count() ?? 0,
            error: error instanceof Error ? error.message : String(error),
          }),
      )
    } else {
      const usage = process.cpuUsage()
      send({ type: 'cpu', id: m.id, micros: usage.user + usage.system })
    }
  })

  // As the dispatch handler drains the projects of one SQS batch: all at once, but no more drains
  // than the pool can serve (each holds up to three connections: claim, record, release).
  const drainAll = async (projects: string[]): Promise<number> => {
    const d = deps
    if (!d) throw new Error('not initialised')
    statements?.reset()
    const todo = [...projects]
    let succeeded = 0
    const parallel = Math.max(1, Math.floor(d.config.DB_POOL_MAX / 3))
    await Promise.all(
      Array.from({ length: Math.min(parallel, todo.length) }, async () => {
        for (let p = todo.shift(); p !== undefined; p = todo.shift()) {
          succeeded += (await drainProject(d, p, { remainingMs: () => Infinity })).succeeded
        }
      }),
    )
    return succeeded
  }

  // The parent going away (even killed) closes the IPC channel; the dispatcher must not outlive it.
  process.on('disconnect', () => {
    void (deps ? closeDeps(deps) : Promise.resolve()).finally(() => process.exit(0))
  })
}

// Only the forked child serves: tsx itself may give the parent an IPC channel too.
const ipcSend = process.send?.bind(process)
if (process.env.BENCH_DISPATCHER === '1' && ipcSend)
  main(m => {
    ipcSend(m)
  })

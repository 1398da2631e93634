import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps, type Deps } from '../../lib/deps.js'
import { createLogger, type Logger, type Sink } from '../../lib/log.js'
import { freshDatabase, type TestDatabase } from './db.js'
import { startQueue, type TestQueue } from './sqs.js'

/** What captureLogs() hands back: every line written since it was called, and those lines parsed. */
export type CapturedLogs = { lines: string[]; records(): Array<Record<string, unknown>>; restore(): void }

export type TestEnv = {
  deps: Deps
  queue: TestQueue
  db: TestDatabase
  /** The logger `deps` writes with (debug level, into this env's sink); pass it to any extra deps a test builds. */
  log: Logger
  /** Captures every line the env's logger (and its children) writes until `restore()`. */
  captureLogs(): CapturedLogs
  close(): Promise<void>
}

/** Dependencies over a fresh database and an in-process queue, built exactly as a cold start builds them. */
export async function testEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  const db = await freshDatabase()
  const queue = await startQueue()
  // Receivers listen on 127.0.0.1, which the egress guard refuses unless allowed.
  const config = loadConfig({
    DATABASE_URL: db.url,
    SIGNAL_QUEUE_URL: queue.queueUrl,
    LOG_LEVEL: 'debug',
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    ...env,
  })
  const { log, captureLogs } = logCapture()
  const deps = createDeps(config, { sqs: queue.client, log })
  return {
    deps,
    queue,
    db,
    log,
    captureLogs,
    close: async () => {
      await closeDeps(deps)
      await queue.stop()
      await db.drop()
    },
  }
}

/**
 * A debug-level logger (and its sink) for deps a test builds itself; `captureLogs()` collects the
 * lines written until `restore()`. Test runs print nothing unless ACTIONS_TEST_LOGS=1.
 */
export function logCapture(): { log: Logger; sink: Sink; captureLogs(): CapturedLogs } {
  const captures = new Set<string[]>()
  const echo = process.env.ACTIONS_TEST_LOGS === '1'
  const sink: Sink = line => {
    for (const lines of captures) lines.push(line)
    if (echo) process.stdout.write(line + '\n')
  }
  return {
    log: createLogger('debug', sink),
    sink,
    captureLogs: () => {
      const lines: string[] = []
      captures.add(lines)
      return {
        lines,
        records: () => lines.map(l => JSON.parse(l) as Record<string, unknown>),
        restore: () => {
          captures.delete(lines)
        },
      }
    },
  }
}

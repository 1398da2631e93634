import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { createRuntime, type Runtime } from '../../lib/lambda.js'
import { setLogSink } from '../../lib/log.js'
import { freshDatabase } from './db.js'
import { startQueue, type TestQueue } from './sqs.js'

export type TestEnv = {
  runtime: Runtime
  queue: TestQueue
  db: Awaited<ReturnType<typeof freshDatabase>>
  close(): Promise<void>
}

/** A runtime over a fresh database and an in-process queue, built exactly as a cold start builds it. */
export async function testEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  const db = await freshDatabase()
  const queue = await startQueue()
  // Receivers listen on 127.0.0.1, which the egress guard refuses unless allowed.
  const config = loadConfig({ DATABASE_URL: db.url, SIGNAL_QUEUE_URL: queue.queueUrl, LOG_LEVEL: 'debug', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', ...env })
  const deps = createDeps(config, { sqs: queue.client })
  const runtime = createRuntime(deps)
  return {
    runtime, queue, db,
    close: async () => {
      await closeDeps(deps)
      await queue.stop()
      await db.drop()
    },
  }
}

/** Captures every log line written until `restore()`; lines are parsed JSON records. */
export function captureLogs(): { lines: string[]; records(): Array<Record<string, unknown>>; restore(): void } {
  const lines: string[] = []
  const prev = setLogSink(line => { lines.push(line) })
  return {
    lines,
    records: () => lines.map(l => JSON.parse(l) as Record<string, unknown>),
    restore: () => { setLogSink(prev) },
  }
}

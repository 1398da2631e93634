// The local stack for a test file: started in beforeAll on the file's database (any free port, the
// sweeper's timer out of the way, log lines captured, nothing printed), stopped in afterAll.
import { afterAll, beforeAll } from 'vitest'
import { startLocalStack, type LocalStack, type LocalStackOptions } from '../../local/stack.js'
import type { TestDatabase } from './db.js'
import { logCapture, type CapturedLogs } from './runtime.js'

/** What {@link useLocalStack} hands a file: the stack, and every line it logged (until afterAll). */
export type StackHandle = { readonly stack: LocalStack; readonly logs: CapturedLogs; readonly printed: string[] }

/**
 * Starts a local stack for `db` before the file's tests; `options` add to the defaults (`env` is merged
 * over `DATABASE_URL`). The file's own afterAll hooks run first, so they may still call the stack.
 */
export function useLocalStack(db: TestDatabase, options: Omit<LocalStackOptions, 'logSink' | 'print'> = {}): StackHandle {
  let stack: LocalStack | undefined
  let logs: CapturedLogs | undefined
  const printed: string[] = []
  beforeAll(async () => {
    const capture = logCapture()
    logs = capture.captureLogs()
    stack = await startLocalStack({
      port: 0,
      sweepIntervalMs: 3_600_000,
      ...options,
      env: { DATABASE_URL: db.url, LOG_LEVEL: 'debug', ...options.env },
      logSink: capture.sink,
      print: line => printed.push(line),
    })
  })
  afterAll(async () => {
    await stack?.stop()
    logs?.restore()
  })
  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useLocalStack: ${what} is not started yet (used before beforeAll)`)
    return value
  }
  return {
    get stack() {
      return started(stack, 'the stack')
    },
    get logs() {
      return started(logs, 'the log capture')
    },
    printed,
  }
}

import { describeError } from './errors.js'

/** Structured JSON logging, one line per record. Callers pass names and ids, never URLs, headers or variable values. */
export type Level = 'debug' | 'info' | 'warn' | 'error'
export type Fields = Record<string, unknown>

export interface Logger {
  debug(msg: string, fields?: Fields): void
  info(msg: string, fields?: Fields): void
  warn(msg: string, fields?: Fields): void
  error(msg: string, fields?: Fields): void
  /** Writes `record` as one line, whatever the level, with this logger's fields (EMF metric lines). */
  emit(record: Fields): void
  child(fields: Fields): Logger
}

const rank: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 }

/** Where lines go. Injected into each logger, so a test or the local stack captures or redirects them without a global. */
export type Sink = (line: string) => void

/** Lambda's log stream: CloudWatch Logs takes every stdout line as one record. */
export const stdoutSink: Sink = line => {
  process.stdout.write(line + '\n')
}

/** Creates a logger that writes records at or above `level` to `sink`, each carrying `base`. */
export function createLogger(level: Level = 'info', sink: Sink = stdoutSink, base: Fields = {}): Logger {
  const write = (lvl: Level, msg: string, fields?: Fields) => {
    if (rank[lvl] < rank[level]) return
    sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields }, errorReplacer))
  }
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    emit: record => sink(JSON.stringify({ ...base, ...record }, errorReplacer)),
    child: fields => createLogger(level, sink, { ...base, ...fields }),
  }
}

// Errors serialize as ./errors.ts describes them: name, message (callers keep it secret-free) and code,
// then causes by name and code only (a driver's or SDK's message may quote a URL or input).
function errorReplacer(_key: string, value: unknown): unknown {
  return value instanceof Error ? describeError(value) : value
}

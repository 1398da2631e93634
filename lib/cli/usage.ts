import { parseArgs, type ParseArgsConfig } from 'node:util'
import type pg from 'pg'
import type { Signals } from '../signals.js'

/** A mistake in the command line: printed with the usage text, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** Where a command writes: stdout lines and stderr lines; `json` when --json asked for documents on stdout. */
export type Io = { out: (s: string) => void; err: (s: string) => void; json?: boolean }

/** What the event commands need: the database, and the signal queue when one is configured. */
export type EventsContext = { pool: pg.Pool; signals: () => Signals | undefined }

/**
 * Parses one command's arguments with `node:util` parseArgs, strictly: an unknown flag or a flag
 * without its value is a usage error (its cause kept), `--limit=5` and `--limit 5` mean the same.
 */
export function parseCommand<O extends NonNullable<ParseArgsConfig['options']>>(command: string, args: string[], options: O) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true })
  } catch (cause) {
    // parseArgs names the flag (`--token`), never the value given with it (`--token=…`).
    throw new UsageError(`${command}: ${cause instanceof Error ? cause.message : 'invalid arguments'}`, { cause })
  }
}

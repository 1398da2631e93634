import type { Io } from './usage.js'

/**
 * Splits `--json` off a command's arguments (before a `--`, which ends the flags), so every command
 * takes it the same way and its own strict parser never sees it.
 */
export function takeJson(args: readonly string[]): { json: boolean; args: string[] } {
  const end = args.indexOf('--')
  const flags = end < 0 ? args : args.slice(0, end)
  if (!flags.includes('--json')) return { json: false, args: [...args] }
  const kept = flags.filter(a => a !== '--json')
  return { json: true, args: end < 0 ? kept : [...kept, ...args.slice(end)] }
}

/** Prints one JSON document on one line (Dates as ISO 8601 text, as JSON.stringify writes them). */
export function printDocument(io: Io, doc: unknown): void {
  io.out(JSON.stringify(doc))
}

/** Prints a listing as NDJSON: one document per line, nothing else, so the line count is the item count. */
export function printLines(io: Io, docs: Iterable<unknown>): void {
  for (const doc of docs) io.out(JSON.stringify(doc))
}

/**
 * A line that tells a person what happened (a count, a confirmation). With --json stdout holds only
 * documents, so the line goes to stderr instead.
 */
export function say(io: Io, line: string): void {
  if (io.json) io.err(line)
  else io.out(line)
}

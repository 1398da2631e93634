import { ValidationError } from '../errors.js'

// The bounds of what a schema and a producer may ask of the engine (docs/enqueue.md). Each is a
// named constant so validation at the edge and the checks at dispatch agree on one number.

/** Largest value a Postgres `int` column or cast takes; larger numbers overflow the record statement. */
export const MAX_INT32 = 2_147_483_647

/** Attempts per event: upstream's default is 10; past 1000 an event would retry for centuries. */
export const MAX_ATTEMPTS = 1000

/** First retry interval at most one day: the doubling makes anything longer useless and risks overflow. */
export const MAX_INITIAL_REPEAT_INTERVAL_MS = 24 * 60 * 60 * 1000

/**
 * Per-target caps: a receiver that takes more than this many requests at once or per second
 * needs no cap; the bound keeps a typo from meaning "unlimited" in disguise. The slowest rate is one
 * request every 100 s, so a waiting target still moves within the sweeper's horizon.
 */
export const MAX_IN_FLIGHT = 10_000
export const MAX_PER_SECOND = 10_000
export const MIN_PER_SECOND = 0.01

/** Events per POST at most: the claim and the request body grow with it. */
export const MAX_BATCH_SIZE = 1000

/**
 * Default longest `timeoutMs` a target may set (config MAX_TARGET_TIMEOUT_MS overrides it). It must
 * stay below the dispatch function's timeout minus DISPATCH_TIME_MARGIN_MS, or a drain could never
 * start a delivery to that target.
 */
export const DEFAULT_MAX_TARGET_TIMEOUT_MS = 60_000

/** Keys a path or a body template may not use: they reach Object.prototype instead of the object. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor'])

/** Header names the engine owns or that would corrupt the request framing. */
export const FORBIDDEN_HEADERS: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding', 'connection'])

/** One event's payload, serialized, at most (SQS-sized: a bigger payload belongs in the receiver's own fetch). */
export const MAX_PAYLOAD_BYTES = 256 * 1024

/**
 * One actions schema, serialized, at most. Every enqueue and drain holds its project's schema parsed (2-3
 * times its text in heap), so a schema must stay small beside the functions' memory; a rich schema
 * of 5,000 targets and 5,000 triggers (headers, body, selection) is 2.8 MiB, well inside.
 */
export const MAX_SCHEMA_BYTES = 8 * 1024 * 1024

/** JSON nesting at most: deeper input is hostile, and recursive code over it would overflow the stack. */
export const MAX_DEPTH = 64

/** Events per enqueue request at most. */
export const MAX_EVENTS_PER_REQUEST = 10_000

/** One enqueue request, serialized, at most (Lambda's synchronous invocation payload limit). */
export const MAX_REQUEST_BYTES = 6_000_000

/** How much of an offending input an error message may quote. */
export const MAX_QUOTED_CHARS = 64

/**
 * Longest name, in UTF-8 bytes: a project, target, trigger or variable name. Names are keys of btree
 * indexes (the event table's due index and key, the target-health and variable keys), and Postgres
 * refuses an index row over about 2,700 bytes: a target name that long made every record of its
 * failures fail, leaving attempts uncounted and redelivered. 255 leaves room for the other key columns
 * and is longer than any name a person writes.
 */
export const MAX_NAME_BYTES = 255

/** Why `value` cannot be a name (`field: …`), or undefined when it can. */
export function nameProblem(field: string, value: string): string | undefined {
  const bytes = Buffer.byteLength(value)
  if (bytes === 0) return `${field}: expected a non-empty name`
  return bytes > MAX_NAME_BYTES ? `${field}: ${bytes} bytes, expected a name of at most ${MAX_NAME_BYTES} bytes (UTF-8)` : undefined
}

/** Throws a {@link ValidationError} of `subject` naming every field whose value cannot be a name. */
export function assertNames(subject: string, fields: ReadonlyArray<readonly [field: string, value: string]>): void {
  const problems = fields.flatMap(([field, value]) => nameProblem(field, value) ?? [])
  if (problems.length) throw new ValidationError(subject, problems.slice(0, 20))
}

/**
 * Characters (UTF-16 code units, JavaScript's string length) of one variable value at most, on every
 * path that sets one: REST PUT/PATCH, GraphQL setVariables and the CLI all reach setVariables in
 * lib/db/variables.ts, which refuses more. A value is a credential or a base URL, never a document:
 * the templates splice it into every request, and every stored receiver text is searched for it.
 */
export const MAX_VARIABLE_CHARS = 16 * 1024

/** Why `value` cannot be a variable's value (`field: …`, never quoting it), or undefined when it can. */
export function variableValueProblem(field: string, value: string): string | undefined {
  if (value.length > MAX_VARIABLE_CHARS) return `${field}: ${value.length} characters, expected at most ${MAX_VARIABLE_CHARS}`
  // Postgres text cannot hold NUL: refused with a message instead of a driver error.
  if (value.includes('\u0000')) return `${field}: a value may not hold NUL (U+0000)`
  return undefined
}

/**
 * Bytes of one GraphQL answer at most, by default (GRAPHQL_MAX_ANSWER_BYTES). A Lambda function URL
 * answers at most 6 MB (buffered), and what the answer holds is in memory at least twice (the rows,
 * the JSON); 5 MiB leaves room for the headers and the envelope. Larger exports belong in SQL or the
 * REST listings' pages.
 */
export const DEFAULT_GRAPHQL_ANSWER_BYTES = 5 * 1024 * 1024

/** Hosts one target's `allowedHosts` may list at most: an environment per entry, far above any project's. */
export const MAX_ALLOWED_HOSTS = 100

/** Characters of one allowed host at most: a DNS name's own bound. */
export const MAX_ALLOWED_HOST_CHARS = 253

/** The numeric limits a target must respect to be run; `maxTimeoutMs` comes from the configuration. */
export type TargetLimits = { maxTimeoutMs: number }

/** What a target needs checked to be runnable (its name is a key of the health table); a structural subset of the webhook target. */
export type TargetNumbers = {
  name?: string | undefined
  maxInFlight?: number | undefined
  maxPerSecond?: number | undefined
  timeoutMs?: number | undefined
  maxAttempts?: number | undefined
  initialRepeatIntervalMs?: number | undefined
  batchSize?: number | undefined
  payloadPath?: readonly string[] | undefined
}

/**
 * Why a target cannot be run under these limits, as `field: problem` lines (empty when it can).
 * Used by validation at `schema set` and by dispatch for schemas stored before a limit existed.
 */
export function targetProblems(target: TargetNumbers, limits: TargetLimits): string[] {
  const problems: string[] = []
  const name = target.name === undefined ? undefined : nameProblem('name', target.name)
  if (name) problems.push(name)
  const check = (field: string, value: number | undefined, min: number, max: number) => {
    if (value === undefined) return
    if (!Number.isInteger(value) || value < min || value > max) problems.push(`${field}: expected an integer from ${min} to ${max}`)
  }
  check('timeoutMs', target.timeoutMs, 1, limits.maxTimeoutMs)
  check('maxAttempts', target.maxAttempts, 1, MAX_ATTEMPTS)
  check('initialRepeatIntervalMs', target.initialRepeatIntervalMs, 1, MAX_INITIAL_REPEAT_INTERVAL_MS)
  check('batchSize', target.batchSize, 1, MAX_BATCH_SIZE)
  check('maxInFlight', target.maxInFlight, 1, MAX_IN_FLIGHT)
  const rate = target.maxPerSecond
  if (rate !== undefined && (!Number.isFinite(rate) || rate < MIN_PER_SECOND || rate > MAX_PER_SECOND)) {
    problems.push(`maxPerSecond: expected a number from ${MIN_PER_SECOND} to ${MAX_PER_SECOND}`)
  }
  for (const key of target.payloadPath ?? []) {
    if (FORBIDDEN_KEYS.has(key)) problems.push(`payloadPath: "${key}" is not allowed as a key`)
  }
  return problems
}

/**
 * Events one enqueue request may write after mutations fan out to their triggers: one INSERT's arrays
 * and one answer (ids) stay bounded even when a mutation fires many triggers.
 */
export const MAX_WRITTEN_EVENTS_PER_REQUEST = 50_000

/** Most outbox rows the relay moves in one batch: Actions' own largest delivery batch, so one move never outgrows a drain's. */
export const MAX_RELAY_BATCH_SIZE = MAX_BATCH_SIZE
/** Shortest relay poll: below it an idle relay would keep a Contember database busy for nothing (it wakes on LISTEN anyway). */
export const MIN_RELAY_POLL_MS = 100
/** Longest relay poll: a lost notification costs at most this, so ten minutes is as long as a stall may last. */
export const MAX_RELAY_POLL_MS = 600_000
/**
 * Most events one bulk statement changes (and the default --limit). The statement holds a row lock on
 * each changed event until it commits, delaying dispatchers that reach those rows; 100,000 rows take
 * seconds. A larger replay is the same command run again (each run takes the oldest that still match).
 */
export const MAX_BULK_EVENTS = 100_000

/**
 * The error vocabulary shared by the engine, the edge and the CLI: one validation error for outside
 * input, and one safe describer that the logger and the CLI use to turn any error into words.
 */

/**
 * Outside input (the environment, an actions schema, an enqueue request) that cannot be used: every
 * problem, each naming its path and limit, never quoting a value (values may be secrets or URLs).
 */
export class ValidationError extends Error {
  override name = 'ValidationError'
  /** `subject` says what was invalid ("configuration", "actions schema"); it heads the message. */
  constructor(
    readonly subject: string,
    readonly problems: string[],
    options?: ErrorOptions,
  ) {
    super(`Invalid ${subject}:\n${problems.map(p => `  - ${p}`).join('\n')}`, options)
  }
}

/** Thrown when the environment does not describe a runnable configuration. */
export class ConfigError extends ValidationError {
  override name = 'ConfigError'
  constructor(problems: string[], options?: ErrorOptions) {
    super('configuration', problems, options)
  }
}

/** A cause as it may be told: its name and code only. */
export type SafeCause = { name: string; code?: string; cause?: SafeCause }
/** An error as it may be told: the thrower's own name, message and code, then its causes by name and code. */
export type SafeError = SafeCause & { message: string }

/**
 * Causes told per error. Chains are short in practice (ours, an SDK's, a socket's); the cap keeps a
 * cyclic or runaway chain from growing a log line without bound.
 */
const MAX_CAUSES = 3

/**
 * Describes an error for a log line or a terminal. The top error's message is ours (secret-free by
 * the house rules); the causes past it come from drivers and SDKs, whose messages may quote input,
 * a URL or a header, so only their names and codes are told.
 */
export function describeError(e: unknown): SafeError {
  if (!(e instanceof Error))
    return { name: 'NonError', message: typeof e === 'string' ? 'a string was thrown' : `a ${typeof e} was thrown` }
  const cause = describeCause(e.cause)
  const code = errorCode(e)
  return { name: e.name, message: e.message, ...(code ? { code } : {}), ...(cause ? { cause } : {}) }
}

/** The name-and-code chain of a caught error (undefined when there is none), for a `cause` that must stay safe. */
export function describeCause(e: unknown, depth = MAX_CAUSES): SafeCause | undefined {
  if (e === undefined || depth <= 0) return undefined
  if (!(e instanceof Error)) {
    // A cause built as a plain value ({ name, code }) by a thrower that already made it safe.
    if (typeof e === 'object' && e !== null && 'name' in e && typeof e.name === 'string') {
      const code = errorCode(e)
      return code ? { name: e.name, code } : { name: e.name }
    }
    return { name: typeof e }
  }
  const code = errorCode(e)
  const next = describeCause(e.cause, depth - 1)
  return { name: e.name, ...(code ? { code } : {}), ...(next ? { cause: next } : {}) }
}

/** One line for a terminal: `Name: message (cause: Name CODE ← Name)`. */
export function formatError(e: unknown): string {
  const d = describeError(e)
  const causes: string[] = []
  for (let c = d.cause; c; c = c.cause) causes.push(`${c.name}${c.code ? ` ${c.code}` : ''}`)
  return `${d.name}: ${d.message}${causes.length ? ` (cause: ${causes.join(' ← ')})` : ''}`
}

/** A Node system error's or a driver's code (`ECONNREFUSED`, a SQLSTATE), when it is a string. */
export function errorCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined
}

import type { z } from 'zod'
import { FORBIDDEN_KEYS, MAX_QUOTED_CHARS } from './limits.js'

// Outside JSON is inspected here, iteratively, before zod sees it: zod and JSON.stringify recurse, so
// input nested 10,000 deep would overflow the stack, and Postgres rejects NUL and lone surrogates with
// an error that names no field.

/** JSON as upstream's `@contember/schema` types it (its `JSONValue`): objects may be read with absent keys. */
export type JsonValue = string | number | boolean | null | JsonObject | JsonArray
export type JsonObject = { readonly [K in string]?: JsonValue }
export type JsonArray = readonly JsonValue[]

/** Problems reported at most per request: a 10,000-event request with one mistake each needs no 10,000-line message. */
export const MAX_PROBLEMS = 20

export type InspectOptions = {
  /** Deepest nesting allowed, the root being level 1 (a scalar root is level 0). */
  maxDepth: number
  /** Reject `__proto__`, `prototype` and `constructor` as object keys. */
  forbidPrototypeKeys?: boolean
  /** Levels of envelope above the values whose nesting counts (an enqueue request wraps payloads in 3). */
  depthOffset?: number
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a string cannot be stored as Postgres text or jsonb (undefined when it can). */
export function textProblem(s: string): string | undefined {
  if (s.includes('\0')) return 'contains a NUL character'
  if (LONE_SURROGATE.test(s)) return 'contains a lone surrogate (not valid Unicode)'
  return undefined
}

/** At most MAX_QUOTED_CHARS of `s`, for an error message. */
export function quote(s: string): string {
  const cut = s.length > MAX_QUOTED_CHARS ? `${s.slice(0, MAX_QUOTED_CHARS)}…` : s
  return JSON.stringify(cut)
}

/** A path as `a.b.0.c`, each segment cut to a short prefix and made printable. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map(p => {
      const s = String(p)
      const printable = s.length > MAX_QUOTED_CHARS ? `${s.slice(0, MAX_QUOTED_CHARS)}…` : s
      return textProblem(printable) || /[.\s"]/.test(printable) ? quote(printable) : printable
    })
    .join('.')
}

/**
 * Walks a value without recursion and lists what makes it unfit to be stored as JSON: a type JSON
 * does not have, a number that is not finite, nesting beyond `maxDepth`, text Postgres rejects, and
 * (optionally) prototype keys. Each problem names its path under `base`; the walk stops at MAX_PROBLEMS.
 */
export function inspectJson(value: unknown, base: readonly PropertyKey[], opts: InspectOptions): string[] {
  const problems: string[] = []
  const stack: Walked[] = [{ value, path: base, depth: -(opts.depthOffset ?? 0) }]
  const add = (path: readonly PropertyKey[], message: string) => {
    problems.push(path.length ? `${formatPath(path)}: ${message}` : message)
  }
  while (stack.length > 0 && problems.length < MAX_PROBLEMS) {
    const item = stack.pop()
    if (!item) break
    const { value: v, path, depth } = item
    if (typeof v === 'string') {
      const problem = textProblem(v)
      if (problem) add(path, problem)
      continue
    }
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) add(path, 'expected a finite number')
      continue
    }
    if (typeof v === 'boolean' || v === null) continue
    if (typeof v !== 'object') {
      add(path, `expected a JSON value, got ${typeof v}`)
      continue
    }
    if (depth + 1 > opts.maxDepth) {
      add(path, `nested deeper than ${opts.maxDepth} levels`)
      continue
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: [...path, i], depth: depth + 1 })
      continue
    }
    const proto: unknown = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) {
      add(path, 'expected a plain JSON object')
      continue
    }
    pushEntries(v, item, stack, opts, add)
  }
  return problems
}

type Walked = { value: unknown; path: readonly PropertyKey[]; depth: number }

/** Puts a plain object's entries on the walk's stack (in order), or adds the problem of a key that is unfit. */
function pushEntries(
  v: object,
  { path, depth }: Walked,
  stack: Walked[],
  opts: InspectOptions,
  add: (path: readonly PropertyKey[], message: string) => void,
): void {
  const keys = Object.keys(v)
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i] ?? ''
    const keyProblem = textProblem(key)
    if (keyProblem) add([...path, key], `key ${keyProblem}`)
    else if (opts.forbidPrototypeKeys && FORBIDDEN_KEYS.has(key))
      add([...path, key], 'is not allowed as a key (it reaches Object.prototype)')
    else stack.push({ value: Reflect.get(v, key), path: [...path, key], depth: depth + 1 })
  }
}

/** Longest zod message kept: messages may quote an unrecognized key, and a key can be megabytes long. */
const MAX_MESSAGE_CHARS = 200

/** Describes zod issues as bounded `path: message` lines (at most MAX_PROBLEMS); never quotes a value. */
export function describeBounded(issues: readonly z.core.$ZodIssue[], base: readonly PropertyKey[] = []): string[] {
  const lines = issues.slice(0, MAX_PROBLEMS).map(issue => {
    const path = formatPath([...base, ...issue.path])
    const raw =
      issue.code === 'invalid_type' && issue.message.includes('received undefined')
        ? 'required'
        : issue.code === 'unrecognized_keys'
          ? `unrecognized key(s): ${issue.keys.slice(0, 5).map(quote).join(', ')}${issue.keys.length > 5 ? ', …' : ''}`
          : issue.message
    const message = raw.length > MAX_MESSAGE_CHARS ? `${raw.slice(0, MAX_MESSAGE_CHARS)}…` : raw
    return path ? `${path}: ${message}` : message
  })
  if (issues.length > MAX_PROBLEMS) lines.push(`… and ${issues.length - MAX_PROBLEMS} more problem(s)`)
  return lines
}

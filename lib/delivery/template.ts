import { randomUUID } from 'node:crypto'
import type { ClaimedEvent } from '../events.js'
import type { WebhookTarget } from '../schema/actions.js'
import { compactJsonb } from './jsonb.js'

/**
 * A `{{NAME}}` placeholder naming a project variable, as upstream matches it: word characters only, no
 * spaces inside the braces. `{{ name }}`, `{{a.b}}` and `{{a-b}}` are left as text.
 */
const PLACEHOLDER = /\{\{([A-Za-z0-9_]+)\}\}/g

/** Thrown when a template names a variable the project does not define; the message names it, never a value. */
export class UndefinedVariableError extends Error {
  override name = 'UndefinedVariableError'
  constructor(readonly variable: string) {
    super(`Undefined variable ${variable}`)
  }
}

/** Thrown when `payloadPath` leads through a value of the body template that is not an object. */
export class PayloadPathError extends Error {
  override name = 'PayloadPathError'
  constructor(readonly index: number) {
    super(`Invalid payloadPath: segment ${index} of the path is not an object in the body template`)
  }
}

/** Replaces every `{{NAME}}` with the project variable's value; a missing or empty one fails (upstream). */
export function substitute(template: string, variables: ReadonlyMap<string, string>): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const value = variables.get(name)
    if (!value) throw new UndefinedVariableError(name)
    return value
  })
}

/** The wire `meta` of one event (upstream's field names and order). */
function eventMeta(row: ClaimedEvent) {
  return {
    eventId: row.id,
    transactionId: row.transaction_id,
    identityId: row.identity_id,
    ipAddress: row.ip_address,
    userAgent: row.user_agent,
    createdAt: row.created_at,
    lastStateChange: row.last_state_change,
    numRetries: row.num_retries,
    trigger: row.trigger,
    target: row.target,
  }
}

/**
 * One event of a batch, serialized: the bytes `JSON.stringify({ meta, ...payload })` gives (upstream's
 * shape), built by splicing the stored payload text after `meta` instead of parsing and re-serializing
 * it. Payloads where the spread would reorder or override (a top-level `meta` key, integer-like keys,
 * which JS objects put first) take that very path instead (see {@link compactJsonb}).
 */
function eventJson(row: ClaimedEvent): string {
  const payload = compactJsonb(row.payload)
  if (!spliceable(payload)) return viaObject(row)
  const meta = JSON.stringify(eventMeta(row))
  return payload === '{}' ? `{"meta":${meta}}` : `{"meta":${meta},${payload.slice(1)}`
}

/**
 * {@link eventJson}'s bytes, appended to `chunks` as Buffers (a large batch). The compacted payload is
 * flattened once, straight into its Buffer, and its leading `{` dropped from the Buffer, not sliced off
 * a string: slicing and splicing a 40 KB payload as strings leaves 80 KB of heap garbage per event, and
 * garbage made while V8 marks incrementally lives through that cycle (Node 24 ran out of a 128 MB heap
 * on it in a burst of 1,000 such events).
 */
function appendEventJson(row: ClaimedEvent, chunks: Buffer[]): void {
  const payload = compactJsonb(row.payload)
  if (!spliceable(payload) || payload === '{}') {
    chunks.push(Buffer.from(eventJson(row)))
    return
  }
  chunks.push(Buffer.from(`{"meta":${JSON.stringify(eventMeta(row))},`), Buffer.from(payload).subarray(1))
}

/** Whether `meta` can be spliced into the compacted payload text; a stored payload is an object (enqueue checks it), anything else keeps the spread's behaviour too. */
const spliceable = (payload: string | undefined): payload is string => payload !== undefined && payload.startsWith('{')

/** The event as upstream writes it, through the object: `{ meta, ...payload }`. */
const viaObject = (row: ClaimedEvent): string => JSON.stringify({ meta: eventMeta(row), ...(JSON.parse(row.payload) as object) })

/** An object without a prototype: any key, `__proto__` included, is an own property and nothing else. */
type Dict = { [key: string]: unknown }
const dict = (): Dict => Object.create(null) as Dict

/**
 * The request body, as upstream builds it: a copy of `target.body` (or `{}`); `payloadPath` (default
 * `[]`) leads from its root to an object, creating missing (or null) objects on the way, and that
 * object gets the key `events` holding the batch. The copy is made of prototype-less objects, so a
 * stored schema with `__proto__` or `constructor` keys can neither reach nor change Object.prototype.
 * Throws {@link PayloadPathError} when the path runs into a value that is not an object.
 */
function requestBody(target: WebhookTarget, events: unknown): Dict {
  const body = target.body ? copyJson(target.body) : dict()
  if (!isDict(body)) throw new PayloadPathError(0)
  let node = body
  for (const [i, key] of (target.payloadPath ?? []).entries()) {
    const next = node[key]
    if (next === undefined || next === null) {
      const created = dict()
      node[key] = created
      node = created
    } else if (isDict(next)) {
      node = next
    } else {
      // Upstream throws here for a number or string and silently loses the events in an array.
      throw new PayloadPathError(i)
    }
  }
  node['events'] = events
  return body
}

// Stands for the events array while a target's template is serialized; random, so no template holds it.
const EVENTS_MARK = JSON.stringify(`events-${randomUUID()}`)
/**
 * The serialized body before and after a target's events array, or why the template cannot hold one.
 * Worked out per call: a cache per target measured no cheaper (`actions-b1`/`actions-b50`, Node 22).
 */
function templateOf(target: WebhookTarget): { before: string; after: string } | PayloadPathError | undefined {
  try {
    const json = JSON.stringify(requestBody(target, JSON.parse(EVENTS_MARK)))
    const at = json.indexOf(EVENTS_MARK)
    // A template already holding the mark (it cannot, short of a UUID collision) is built the long way.
    if (at !== json.lastIndexOf(EVENTS_MARK)) return undefined
    return { before: json.slice(0, at), after: json.slice(at + EVENTS_MARK.length) }
  } catch (e) {
    if (!(e instanceof PayloadPathError)) throw e
    return e
  }
}

/**
 * A batch whose stored payloads add up to more characters than this is assembled as a Buffer, event by
 * event: Buffers live outside the JS heap, so a batch of large events (1,000 × 40 KB is one 40 MB body)
 * costs the heap one event at a time instead of the whole body in several string copies. Smaller
 * bodies stay strings, which is cheaper per request.
 */
const LARGE_BODY_CHARS = 1 << 20
const COMMA = Buffer.from(',')

/**
 * The request body's bytes: exactly `JSON.stringify(requestBody(target, events))` with each event
 * in upstream's shape, built from the target's serialized template (once per target) and each
 * event's {@link eventJson}; a Buffer when the batch is large ({@link LARGE_BODY_CHARS}). Throws
 * {@link PayloadPathError} as {@link requestBody} does.
 */
export function requestBodyText(target: WebhookTarget, events: readonly ClaimedEvent[]): string | Buffer {
  const parts = templateOf(target)
  if (parts instanceof PayloadPathError) throw parts
  if (!parts) return JSON.stringify(requestBody(target, JSON.parse(`[${events.map(eventJson).join(',')}]`)))
  let chars = 0
  for (const e of events) chars += e.payload.length
  if (chars > LARGE_BODY_CHARS) {
    const chunks: Buffer[] = [Buffer.from(parts.before + '[')]
    events.forEach((e, i) => {
      if (i > 0) chunks.push(COMMA)
      appendEventJson(e, chunks)
    })
    chunks.push(Buffer.from(']' + parts.after))
    return Buffer.concat(chunks)
  }
  const list = events.length === 1 && events[0] ? `[${eventJson(events[0])}]` : `[${events.map(eventJson).join(',')}]`
  return parts.before + list + parts.after
}

/** A deep copy of JSON data whose objects have no prototype; only own enumerable keys are copied. */
function copyJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyJson)
  if (typeof value !== 'object' || value === null) return value
  const out = dict()
  for (const key of Object.keys(value)) out[key] = copyJson(Reflect.get(value, key))
  return out
}

function isDict(v: unknown): v is Dict {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === null
}

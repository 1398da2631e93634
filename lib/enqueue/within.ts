import { createHash, randomUUID } from 'node:crypto'
import { insertNewEvents, type SerializedEvent } from '../db/events.js'
import type { Queryable } from '../db/pool.js'
import { getCurrentSchema } from '../db/schemas.js'
import type { Signals } from '../signals.js'
import type { ActionsSchema } from '../schema/actions.js'
import { describeBounded, formatPath, MAX_PROBLEMS, quote } from '../schema/json.js'
import { MAX_INT32, MAX_PAYLOAD_BYTES, MAX_WRITTEN_EVENTS_PER_REQUEST } from '../schema/limits.js'
import { eventPayloadSchema, mutationSchema } from '../schema/payload.js'
import { EnqueueValidationError } from './errors.js'
import { fanOut } from './fanout.js'
import { parseEnvelope, unknownTrigger, type ParsedRequest } from './request.js'

/** What an enqueue wrote; `eventIds` in request order, a mutation contributing one id per trigger it fired. */
export type EnqueueResult = {
  /** Every event the request stands for: written now, or already written by an earlier try of the same request. */
  eventIds: string[]
  /** Rows inserted by this call (fewer than `eventIds` when a retried request finds its events already stored). */
  written: number
  /** Indexes of events (mutations without `trigger`) that fired no trigger and wrote nothing. */
  unmatched: number[]
}

/** The W3C trace context stored with each event of a request (migration 015): the enqueue span's. */
export type EventTrace = { traceparent: string; tracestate: string | null } | undefined

/** An enqueue done inside the caller's transaction; pass it to {@link signalAfterCommit} once committed. */
export type EnqueueWithinResult = EnqueueResult & { project: string }

/**
 * Validates the request and writes its events with the caller's client, so inside the caller's
 * transaction: the events exist if and only if the caller commits. Throws EnqueueValidationError
 * (nothing written) for a bad request. Sends no signal: call {@link signalAfterCommit} after COMMIT,
 * or leave it to the sweeper, which re-drives due events within a minute. `opts.trace`: the context
 * stored with the events (the enqueue span's; a library caller may pass its own span's).
 */
export async function enqueueWithin(db: Queryable, input: unknown, opts: { trace?: EventTrace } = {}): Promise<EnqueueWithinResult> {
  const req = parseEnvelope(input)
  const current = await getCurrentSchema(db, req.project)
  if (!current) throw new EnqueueValidationError([`project: unknown project ${quote(req.project)} (no actions schema stored)`])
  const { events, unmatched } = prepare(req, current.schema)
  const written = await insertNewEvents(
    db,
    {
      project: req.project,
      transactionId: req.transactionId,
      stage: req.stage ?? null,
      schemaVersion: current.version,
      identityId: req.identityId ?? null,
      ipAddress: req.ipAddress ?? null,
      userAgent: req.userAgent ?? null,
      trace: opts.trace,
    },
    events,
  )
  return { project: req.project, eventIds: events.map(e => e.id), written: written.length, unmatched }
}

/** Sends the wake-up signal for events written by {@link enqueueWithin}; call it after the transaction commits. */
export async function signalAfterCommit(signals: Signals, result: EnqueueWithinResult): Promise<void> {
  if (result.eventIds.length > 0) await signals.send(result.project)
}

type Prepared = { events: SerializedEvent[]; unmatched: number[] }
type RequestEvent = ParsedRequest['events'][number]
/** What {@link prepare} gathers: the events to write, the problems found, the mutations that fired nothing. */
type Gathered = Prepared & {
  problems: string[]
  add: (index: number, event: Omit<SerializedEvent, 'payloadJson' | 'orderKey'>, payload: unknown, about: About) => void
}

// Resolves triggers (named, or fired by a mutation), parses and measures each payload. Throws before any write.
function prepare(req: ParsedRequest, schema: ActionsSchema): Prepared {
  const g = gathering(req, schema)
  for (const [i, e] of req.events.entries()) {
    if (g.problems.length >= MAX_PROBLEMS) break
    if (e.trigger !== undefined) namedEvent(g, schema, i, e, e.trigger)
    else mutationEvents(g, req, schema, i, e)
    if (g.events.length > MAX_WRITTEN_EVENTS_PER_REQUEST) {
      g.problems.push(`events: the mutations fire more than ${MAX_WRITTEN_EVENTS_PER_REQUEST} events; split the request`)
      break
    }
  }
  if (g.problems.length) throw new EnqueueValidationError(g.problems.slice(0, MAX_PROBLEMS))
  return { events: g.events, unmatched: g.unmatched }
}

/** An empty {@link Gathered} whose `add` measures a payload and checks a priority before it keeps an event. */
function gathering(req: ParsedRequest, schema: ActionsSchema): Gathered {
  const g: Gathered = { events: [], unmatched: [], problems: [], add: () => {} }
  g.add = (index, { id, trigger, target, priority }, payload, about) => {
    const payloadJson = JSON.stringify(payload)
    const bytes = Buffer.byteLength(payloadJson)
    if (bytes > MAX_PAYLOAD_BYTES)
      g.problems.push(`${formatPath(['events', index, 'payload'])}: ${bytes} bytes serialized, expected at most ${MAX_PAYLOAD_BYTES}`)
    else if (!Number.isInteger(priority) || priority < -MAX_INT32 - 1 || priority > MAX_INT32)
      g.problems.push(
        `${formatPath(['events', index])}: the stored schema gives trigger ${formatPath([trigger])} a priority outside 32 bits; store a corrected schema`,
      )
    const ordered = (Object.hasOwn(schema.targets, target) ? schema.targets[target]?.ordering : undefined) !== 'none'
    g.events.push({ id, trigger, target, priority, payloadJson, orderKey: ordered ? orderKey(req.project, target, about) : null })
  }
  return g
}

/** An event that names its trigger: the trigger must exist and the payload match it. */
function namedEvent(g: Gathered, schema: ActionsSchema, i: number, e: RequestEvent, name: string): void {
  const base = ['events', i, 'payload']
  // Own properties only: `constructor` or `toString` must be unknown triggers, not Object.prototype's.
  const trigger = Object.hasOwn(schema.triggers, name) ? schema.triggers[name] : undefined
  if (!trigger) return void g.problems.push(unknownTrigger(i, name))
  const parsed = eventPayloadSchema.safeParse(e.payload)
  if (!parsed.success) return void g.problems.push(...describeBounded(parsed.error.issues, base))
  if (parsed.data.trigger !== undefined && parsed.data.trigger !== name)
    return void g.problems.push(`${formatPath([...base, 'trigger'])}: expected the event's trigger (the payload names another)`)
  // Stored as sent: the producer's own object, which zod's copy might reorder or (for `__proto__` keys) drop.
  const id = e.id?.toLowerCase() ?? randomUUID()
  g.add(i, { id, trigger: name, target: trigger.target, priority: trigger.priority ?? 0 }, e.payload, parsed.data)
}

/** A mutation: every trigger it fires becomes an event, with an id derived from the producer's when it gave one. */
function mutationEvents(g: Gathered, req: ParsedRequest, schema: ActionsSchema, i: number, e: RequestEvent): void {
  const mutation = mutationSchema.safeParse(e.payload)
  if (!mutation.success) return void g.problems.push(...describeBounded(mutation.error.issues, ['events', i, 'payload']))
  const fired = fanOut(schema, mutation.data)
  if (fired.length === 0) g.unmatched.push(i)
  for (const f of fired) {
    const id = e.id === undefined ? randomUUID() : derivedId(req.project, e.id, f.trigger)
    g.add(i, { id, trigger: f.trigger, target: f.target, priority: f.priority }, f.payload, mutation.data)
  }
}

/**
 * The id of the event a mutation with producer id `id` fires for `trigger` in `project`: the same on
 * every retry, so a retried mutation writes nothing twice, and another in every project, so one
 * mutation sent to two projects is two events (a name-based UUID, version 5 layout over SHA-1). The
 * parts are length-prefixed: no project or trigger name can make two different triples hash alike.
 */
export function derivedId(project: string, id: string, trigger: string): string {
  const h = createHash('sha1')
    .update(`actions-mutation\n${project.length}:${project}\n${id.toLowerCase()}\n${trigger.length}:${trigger}`)
    .digest()
  h[6] = ((h[6] ?? 0) & 0x0f) | 0x50
  h[8] = ((h[8] ?? 0) & 0x3f) | 0x80
  const hex = h.subarray(0, 16).toString('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/** What an event is about: the entity its payload names (every accepted payload names one). */
type About = { entity: string; id: string | number }

/**
 * The ordering key of a project's events for one target about one entity (migration 006): 128 bits of
 * SHA-256 over the four, so keys are fixed-size in the index however long the names are, and no
 * tenant can make its key collide with another's. `1` and `"1"` are two ids, as they are two JSON values.
 */
export function orderKey(project: string, target: string, { entity, id }: About): string {
  const h = createHash('sha256')
    .update(JSON.stringify([project, target, entity, id]))
    .digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`
}

import { z } from 'zod'
import { describeBounded, formatPath, inspectJson, MAX_PROBLEMS, quote, textProblem } from '../schema/json.js'
import { MAX_DEPTH, MAX_EVENTS_PER_REQUEST, MAX_NAME_BYTES, MAX_REQUEST_BYTES, nameProblem } from '../schema/limits.js'
import { EnqueueValidationError } from './errors.js'

/** Longest traceparent taken (version 00 is 55 characters; later versions may append fields). */
export const MAX_TRACEPARENT_CHARS = 256
/** Longest tracestate taken: the 512 characters W3C Trace Context asks every vendor to propagate. */
export const MAX_TRACESTATE_CHARS = 512

// A project or trigger name: bounded in bytes (MAX_NAME_BYTES), so no name reaches an index it cannot fit.
const name = z
  .string()
  .min(1)
  .refine(s => nameProblem('', s) === undefined, `expected a name of at most ${MAX_NAME_BYTES} bytes (UTF-8)`)

// The request envelope. Payloads stay `unknown` here: each is parsed by its kind (named trigger or
// mutation) once the envelope holds, so zod never walks a payload before its depth is known.
export const enqueueRequestSchema = z
  .object({
    project: name,
    transactionId: z.uuid(),
    stage: z.string().min(1).optional(),
    identityId: z.uuid().optional(),
    ipAddress: z.string().max(64).optional(),
    userAgent: z.string().max(1024).optional(),
    /** The producer's W3C trace context (docs/enqueue.md); one that does not parse is ignored, as W3C Trace Context says. */
    traceparent: z.string().max(MAX_TRACEPARENT_CHARS).optional(),
    tracestate: z.string().max(MAX_TRACESTATE_CHARS).optional(),
    events: z
      .array(
        z
          .object({
            id: z.uuid().optional(),
            /** Omitted: the payload is a mutation, and enqueue finds the basic triggers it fires. */
            trigger: name.optional(),
            payload: z.unknown(),
          })
          .strict(),
      )
      .max(MAX_EVENTS_PER_REQUEST, `expected at most ${MAX_EVENTS_PER_REQUEST} events`),
  })
  .strict()

export type EnqueueRequest = z.input<typeof enqueueRequestSchema>
export type ParsedRequest = z.output<typeof enqueueRequestSchema>

/** Levels above a payload in a request: the request, its `events` array, the event. */
const ENVELOPE_DEPTH = 3

/**
 * Checks everything about a request that needs no schema: JSON only, text Postgres accepts, payload
 * nesting, serialized size, the envelope's shape and ids unique within the request. Never recurses
 * over the input and never quotes more than a short prefix of it.
 */
export function parseEnvelope(input: unknown): ParsedRequest {
  const jsonProblems = inspectJson(input, [], { maxDepth: MAX_DEPTH, depthOffset: ENVELOPE_DEPTH })
  if (jsonProblems.length) throw new EnqueueValidationError(jsonProblems)
  // Safe now: the walk above bounded the nesting JSON.stringify recurses over.
  const bytes = Buffer.byteLength(JSON.stringify(input) ?? '')
  if (bytes > MAX_REQUEST_BYTES)
    throw new EnqueueValidationError([`request: ${bytes} bytes serialized, expected at most ${MAX_REQUEST_BYTES}`])
  const parsed = enqueueRequestSchema.safeParse(input)
  if (!parsed.success) throw new EnqueueValidationError(describeBounded(parsed.error.issues))
  const req = parsed.data
  const problems: string[] = []
  const firstIndex = new Map<string, number>()
  req.events.forEach((e, i) => {
    if (e.id === undefined) return
    const id = e.id.toLowerCase()
    const first = firstIndex.get(id)
    if (first === undefined) firstIndex.set(id, i)
    else problems.push(`${formatPath(['events', i, 'id'])}: repeats the id of events.${first} (ids must be unique within a request)`)
  })
  if (problems.length) throw new EnqueueValidationError(problems.slice(0, MAX_PROBLEMS))
  return req
}

/** `events.N.trigger: unknown trigger "…"`, quoting at most a short prefix of the name. */
export function unknownTrigger(index: number, name: string): string {
  return `${formatPath(['events', index, 'trigger'])}: unknown trigger ${textProblem(name) ? '' : quote(name)}`.trimEnd()
}

import { z } from 'zod'
import { describeBounded, formatPath, inspectJson, type JsonObject, type JsonValue } from './json.js'
import { ValidationError } from '../errors.js'
import {
  DEFAULT_MAX_TARGET_TIMEOUT_MS,
  FORBIDDEN_HEADERS,
  FORBIDDEN_KEYS,
  MAX_ALLOWED_HOST_CHARS,
  MAX_ALLOWED_HOSTS,
  MAX_DEPTH,
  MAX_INT32,
  MAX_SCHEMA_BYTES,
  nameProblem,
  targetProblems,
  type TargetLimits,
} from './limits.js'

// The upstream `Actions.Schema` shape (`@contember/schema`; test/types/upstream.ts proves the match at
// compile time). `.strict()` everywhere: an unknown key is a typo an operator must hear about.
// Two parses share this shape: the strict one at `schema set` adds the bounds in docs/enqueue.md; the
// structural one reads stored versions, which may predate a bound (dispatch holds such targets back).

// Values are JSON by the time zod sees them: inspectJson has walked the input first (iteratively).
const jsonValue = z.custom<JsonValue>(() => true)
const jsonObject: z.ZodType<JsonObject> = z.record(z.string(), jsonValue)

/** Upstream's `Actions.SelectionNode`: field names and `[relation, args, sub-selection]` triples. */
export type SelectionNode = ReadonlyArray<string | readonly [name: string, args: JsonObject, fields: SelectionNode]>
const selectionNode: z.ZodType<SelectionNode> = z.lazy(() =>
  z.array(z.union([z.string(), z.tuple([z.string(), jsonObject, selectionNode])])),
)

/** RFC 7230 `token`: what a header name may consist of. */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** A URL whose scheme and host come from a variable can only be checked once it is substituted. */
const STARTS_WITH_VARIABLE = /^\{\{/
/** An http(s) URL's authority (credentials, host, port): up to the path, query or fragment (`\\` is `/` in http URLs). */
const HTTP_AUTHORITY = /^https?:\/\/([^/?#\\]*)/i
/** A `{{NAME}}` placeholder as substitution matches it (lib/delivery/template.ts); anything else stays text. */
const PLACEHOLDER = /\{\{[A-Za-z0-9_]+\}\}/
const PLACEHOLDERS = new RegExp(PLACEHOLDER.source, 'g')
/** The engine's own variable syntax (docs/delivery.md). */
const VARIABLE_REFERENCE = /^\{\{[A-Za-z0-9_]+\}\}$/

const number = z.number({ message: 'expected a number' })

export const webhookTargetSchema = z
  .object({
    type: z.literal('webhook'),
    name: z.string().min(1),
    url: z.string().min(1, 'expected a URL'),
    headers: z.record(z.string(), z.string()).optional(),
    body: jsonObject.optional(),
    payloadPath: z.array(z.string()).optional(),
    timeoutMs: number.optional(),
    maxAttempts: number.optional(),
    initialRepeatIntervalMs: number.optional(),
    batchSize: number.optional(),
    /** Extension (not upstream): a `{{NAME}}` variable holding the Standard Webhooks signing secret. */
    signingSecret: z.string().regex(VARIABLE_REFERENCE, 'expected a {{NAME}} variable reference').optional(),
    /**
     * Extension (not upstream): `entity` (the default) delivers the events of one entity (payload
     * `entity` and `id`) one at a time, in enqueue order; `none` lets them overtake each other.
     */
    ordering: z.enum(['entity', 'none'], { message: 'expected "entity" or "none"' }).optional(),
    /** Extension (not upstream): requests to this target in flight at once, across every drain (default: unlimited). */
    maxInFlight: number.optional(),
    /** Extension (not upstream): requests started per second, across every drain (default: unlimited). */
    maxPerSecond: number.optional(),
    /**
     * Extension (not upstream): the hosts the target's URL may reach once its variables are
     * substituted (exact names, or `*.example.com`); a non-admin may move the host only within them
     * (lib/delivery/hosts.ts). Unset: the host is the admin's alone.
     */
    allowedHosts: z.array(z.string()).optional(),
  })
  .strict()

const triggerBase = {
  name: z.string().min(1),
  target: z.string().min(1),
  priority: number.optional(),
  entity: z.string().min(1),
  selection: selectionNode.optional(),
}

export const basicTriggerSchema = z
  .object({
    ...triggerBase,
    type: z.literal('basic'),
    create: z.boolean(),
    delete: z.boolean(),
    update: z.union([z.boolean(), z.array(z.string())]),
  })
  .strict()

export const watchTriggerSchema = z
  .object({
    ...triggerBase,
    type: z.literal('watch'),
    watch: selectionNode,
    /** Newer upstream: events reached through a relation carry the path to the root entity as `nodes`. */
    withNodes: z.boolean().optional(),
  })
  .strict()

export const triggerSchema = z.discriminatedUnion('type', [basicTriggerSchema, watchTriggerSchema])

export const actionsSchemaSchema = z
  .object({
    targets: z.record(z.string(), z.discriminatedUnion('type', [webhookTargetSchema])),
    triggers: z.record(z.string(), triggerSchema),
  })
  .strict()
  .superRefine((schema, ctx) => {
    // A trigger names its target by key: a dangling one would only surface at dispatch time. A target's
    // own `name` may differ from its key (upstream's schema generator writes such inline named targets);
    // the key is what triggers, events and dispatch use.
    for (const [key, trigger] of Object.entries(schema.triggers)) {
      if (trigger.name !== key)
        ctx.addIssue({ code: 'custom', path: ['triggers', key, 'name'], message: 'expected the key of the trigger' })
      if (!Object.hasOwn(schema.targets, trigger.target))
        ctx.addIssue({ code: 'custom', path: ['triggers', key, 'target'], message: 'unknown target (not a key of targets)' })
    }
  })

export type ActionsSchema = z.infer<typeof actionsSchemaSchema>
export type WebhookTarget = z.infer<typeof webhookTargetSchema>
export type Trigger = z.infer<typeof triggerSchema>
export type BasicTrigger = z.infer<typeof basicTriggerSchema>

/** Target option defaults (upstream `Actions.WebhookTarget`). */
export const TARGET_DEFAULTS = { timeoutMs: 30_000, maxAttempts: 10, initialRepeatIntervalMs: 5_000, batchSize: 1 } as const

/** Thrown when a stored or supplied actions schema is invalid; each problem names its path. */
export class SchemaValidationError extends ValidationError {
  override name = 'SchemaValidationError'
  constructor(problems: string[]) {
    super('actions schema', problems)
  }
}

export type SchemaParseOptions = Partial<TargetLimits>

/**
 * Validates an actions schema for storing: upstream's shape plus the bounds in docs/enqueue.md, with
 * `timeoutMs` bounded by `maxTimeoutMs` (config MAX_TARGET_TIMEOUT_MS). Throws
 * {@link SchemaValidationError} listing every problem by path and limit, never quoting a URL or header.
 */
export function parseActionsSchema(input: unknown, opts: SchemaParseOptions = {}): ActionsSchema {
  const limits: TargetLimits = { maxTimeoutMs: opts.maxTimeoutMs ?? DEFAULT_MAX_TARGET_TIMEOUT_MS }
  // zod drops a `__proto__` map key silently; an operator must hear that the name cannot be used.
  const names = prototypeNames(input)
  if (names.length) throw new SchemaValidationError(names)
  const schema = parseStructure(input, MAX_SCHEMA_BYTES)
  const problems = [
    ...Object.entries(schema.targets).flatMap(([key, t]) => targetBounds(key, t, limits)),
    ...Object.entries(schema.triggers).flatMap(([key, t]) => triggerBounds(key, t)),
  ]
  if (problems.length) throw new SchemaValidationError(problems)
  return schema
}

/**
 * Reads a stored actions schema by shape only: a version stored before a bound existed (or under a
 * larger MAX_TARGET_TIMEOUT_MS) still parses, so the rest of its project keeps running. Throws only
 * for a structurally broken schema.
 */
export function parseStoredActionsSchema(input: unknown): ActionsSchema {
  return parseStructure(input)
}

// `maxBytes` only at `schema set`: a stored version may predate the bound.
function parseStructure(input: unknown, maxBytes = Number.POSITIVE_INFINITY): ActionsSchema {
  const jsonProblems = inspectJson(input, [], { maxDepth: MAX_DEPTH })
  if (jsonProblems.length) throw new SchemaValidationError(jsonProblems)
  if (Number.isFinite(maxBytes)) {
    // Safe now: the walk above bounded the nesting JSON.stringify recurses over.
    const bytes = Buffer.byteLength(JSON.stringify(input))
    if (bytes > maxBytes)
      throw new SchemaValidationError([
        `schema: ${bytes} bytes serialized, expected at most ${maxBytes} (MAX_SCHEMA_BYTES, ${maxBytes / 2 ** 20} MiB)`,
      ])
  }
  const parsed = actionsSchemaSchema.safeParse(input)
  if (!parsed.success) throw new SchemaValidationError(describeBounded(parsed.error.issues))
  return parsed.data
}

function prototypeNames(input: unknown): string[] {
  if (typeof input !== 'object' || input === null) return []
  return (['targets', 'triggers'] as const).flatMap(map => {
    const value: unknown = Reflect.get(input, map)
    if (typeof value !== 'object' || value === null) return []
    return Object.keys(value)
      .filter(k => FORBIDDEN_KEYS.has(k))
      .map(k => `${map}.${k}: is not allowed as a name (it reaches Object.prototype)`)
  })
}

/** A host name or IPv4 address, optionally `*.` in front; an IPv6 literal in brackets, as URL writes it. */
const ALLOWED_HOST =
  /^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$|^\[[0-9A-Fa-f:.]+\]$/

function targetBounds(key: string, target: WebhookTarget, limits: TargetLimits): string[] {
  const at = (...rest: string[]) => formatPath(['targets', key, ...rest])
  // The key first: it is the name triggers and dispatch use (and a name problem says the same of it).
  const keyProblem = nameProblem(formatPath(['targets', key]), key)
  if (keyProblem) return [keyProblem]
  // targetProblems speaks `field: problem`; the numbers and payloadPath keys are checked there, once for validation and dispatch.
  const problems = targetProblems(target, limits).map(p => `${at()}.${p}`)
  if (!STARTS_WITH_VARIABLE.test(target.url) && !validHttpUrl(target.url))
    problems.push(`${at('url')}: expected an http: or https: URL (or one starting with a {{VARIABLE}})`)
  for (const name of Object.keys(target.headers ?? {})) {
    if (!HEADER_TOKEN.test(name)) problems.push(`${at('headers')}: a header name must be an RFC 7230 token`)
    else if (FORBIDDEN_HEADERS.has(name.toLowerCase()))
      problems.push(`${at('headers', name)}: cannot be set (the engine owns it: ${[...FORBIDDEN_HEADERS].join(', ')})`)
  }
  for (const [name, value] of Object.entries(target.headers ?? {})) {
    if (/[\r\n]/.test(value))
      problems.push(`${at('headers', HEADER_TOKEN.test(name) ? name : '?')}: a header value cannot contain CR or LF`)
  }
  const hosts = target.allowedHosts ?? []
  if (hosts.length > MAX_ALLOWED_HOSTS) problems.push(`${at('allowedHosts')}: at most ${MAX_ALLOWED_HOSTS} hosts`)
  hosts.slice(0, MAX_ALLOWED_HOSTS).forEach((host, i) => {
    if (!ALLOWED_HOST.test(host) || host.length > MAX_ALLOWED_HOST_CHARS)
      problems.push(
        `${at('allowedHosts', String(i))}: expected a host name, an IP address or *.domain (at most ${MAX_ALLOWED_HOST_CHARS} characters)`,
      )
  })
  if (target.body) problems.push(...inspectJson(target.body, ['targets', key, 'body'], { maxDepth: MAX_DEPTH, forbidPrototypeKeys: true }))
  return problems
}

function triggerBounds(key: string, trigger: Trigger): string[] {
  const problems: string[] = []
  const at = (...rest: string[]) => formatPath(['triggers', key, ...rest])
  for (const [field, value] of [
    [formatPath(['triggers', key]), key],
    [at('name'), trigger.name],
    [at('target'), trigger.target],
  ] as const) {
    const problem = nameProblem(field, value)
    if (problem) problems.push(problem)
  }
  const p = trigger.priority
  if (p !== undefined && (!Number.isInteger(p) || p < -MAX_INT32 - 1 || p > MAX_INT32)) {
    problems.push(`${at('priority')}: expected a 32-bit integer from ${-MAX_INT32 - 1} to ${MAX_INT32}`)
  }
  return problems
}

// Only what holds before substitution: an http(s) scheme, and (when no variable is part of the
// authority) a URL that parses with its path and query placeholders replaced by a harmless letter. A
// variable in the host, port or credentials may hold anything valid there (a port number, an IPv6
// address, `user:pass`), so such a URL is parsed only after substitution, at dispatch (addressTarget),
// where an invalid one fails its attempt without a request.
function validHttpUrl(url: string): boolean {
  const authority = HTTP_AUTHORITY.exec(url)?.[1]
  if (authority === undefined) return false
  if (PLACEHOLDER.test(authority)) return true
  try {
    const parsed = new URL(url.replace(PLACEHOLDERS, 'x'))
    return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname !== ''
  } catch {
    return false
  }
}

// The OpenAPI 3.1 document of the REST routes (GET /v1/openapi.json). Answers are described by
// lib/admin/rest/openapi-schemas.ts; request bodies by the zod schemas the routes parse them with.
import { z } from 'zod'
import { enqueueRequestSchema } from '../enqueue/request.js'
import { actionsSchemaSchema } from '../schema/actions.js'
import { MAX_NAME_BYTES } from '../schema/limits.js'
import { bulkBody } from './rest/bulk.js'
import { retryBody } from './rest/events.js'
import { DEFAULT_PAGE_EVENTS, MAX_PAGE_EVENTS } from './rest/events.js'
import { responseSchemas } from './rest/openapi-schemas.js'
import { variablesBody } from './rest/variables.js'
import type { Need } from './types.js'

type Json = Record<string, unknown>

/** One operation: its route, what it needs, its inputs and its answers (status → component). */
type Operation = {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete'
  path: string
  id: string
  summary: string
  need: Need | 'caller'
  query?: Json[]
  body?: Json
  /** The body may be left out (the bulk forms: then the default filter). */
  bodyOptional?: true
  ok: [status: number, component: string | undefined]
  errors: number[]
}

const name: Json = { type: 'string', minLength: 1, description: `At most ${MAX_NAME_BYTES} bytes of UTF-8.` }
const queryParam = (n: string, schema: Json, description: string): Json => ({ name: n, in: 'query', required: false, schema, description })
const time: Json = { type: 'string', description: 'ISO 8601 date (UTC) or date-time with a zone.' }

/** Definitions the request bodies' schemas share or recurse through, hoisted into components.schemas. */
const BODY_DEFS: Record<string, unknown> = {}

/**
 * A zod schema as a JSON Schema for a request body (its input side: defaults may be left out). zod
 * writes a recursive or shared part as a local `#/$defs/…`; inside a document such a reference would
 * point at the document's root, so the definitions move to components.schemas under `prefix`.
 */
function bodySchema(prefix: string, schema: z.ZodType): Json {
  const { $schema: _, $defs, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })
  const moved = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(moved)
    if (typeof value !== 'object' || value === null) return value
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', `#/components/schemas/${prefix}_`) : moved(v),
      ]),
    )
  }
  for (const [key, def] of Object.entries($defs ?? {})) BODY_DEFS[`${prefix}_${key}`] = moved(def)
  const body = moved(json)
  return typeof body === 'object' && body !== null ? { ...body } : {}
}

const WRITE = [400, 401, 403, 404]
const READ = [400, 401, 403, 404]
const P = '/v1/projects/{project}'

const OPERATIONS: Operation[] = [
  {
    method: 'get',
    path: `${P}/events`,
    id: 'listEvents',
    summary: 'A page of the project’s events, newest change first',
    need: 'view',
    query: [
      queryParam('state', { $ref: '#/components/schemas/EventState' }, 'Only events in this state.'),
      queryParam('target', name, 'Only events of this target.'),
      queryParam('since', time, 'Changed at or after (last state change).'),
      queryParam('until', time, 'Changed before (last state change).'),
      queryParam('limit', { type: 'integer', minimum: 1, maximum: MAX_PAGE_EVENTS, default: DEFAULT_PAGE_EVENTS }, 'Events per page.'),
      queryParam('cursor', { type: 'string', maxLength: 128 }, 'The nextCursor of the previous page.'),
    ],
    ok: [200, 'EventPage'],
    errors: READ,
  },
  {
    method: 'post',
    path: `${P}/events`,
    id: 'enqueueEvents',
    summary: 'Enqueue events (the enqueue function’s contract); project may be left out',
    need: 'admin',
    body: bodySchema('Enqueue', enqueueRequestSchema.partial({ project: true })),
    ok: [200, 'EnqueueResult'],
    errors: WRITE,
  },
  {
    method: 'get',
    path: `${P}/events/{id}`,
    id: 'getEvent',
    summary: 'One event with its attempt log',
    need: 'view',
    ok: [200, 'EventDetail'],
    errors: READ,
  },
  ...(['retry', 'stop'] as const).map((action): Operation => ({
    method: 'post',
    path: `${P}/events/{id}/${action}`,
    id: `${action}Event`,
    summary:
      action === 'retry'
        ? 'Make one event due now, then signal the project; 409 while it is being delivered, and for a delivered or stopped one unless force'
        : 'Stop one event for good; 409 for a delivered or stopped one',
    need: 'admin',
    ...(action === 'retry' ? { body: bodySchema('Retry', retryBody), bodyOptional: true as const } : {}),
    ok: [200, 'EventChange'],
    errors: [...WRITE, 409],
  })),
  ...(['retry', 'stop'] as const).map((action): Operation => ({
    method: 'post',
    path: `${P}/events/${action}`,
    id: `${action}Events`,
    summary: `Bulk ${action} in one statement (the CLI’s filter; created_at bounds, oldest first)${action === 'retry' ? ', then one signal' : ''}; dryRun only counts`,
    need: 'admin',
    body: bodySchema('Bulk', bulkBody),
    bodyOptional: true,
    ok: [200, 'BulkResult'],
    errors: WRITE,
  })),
  {
    method: 'get',
    path: `${P}/targets`,
    id: 'listTargets',
    summary: 'Every target’s health',
    need: 'view',
    ok: [200, 'Targets'],
    errors: READ,
  },
  ...(['pause', 'resume'] as const).map((action): Operation => ({
    method: 'post',
    path: `${P}/targets/{target}/${action}`,
    id: `${action}Target`,
    summary: action === 'pause' ? 'Pause a target (operator, no probe)' : 'Clear a target’s pause and failure run, then signal the project',
    need: 'admin',
    ok: [200, action === 'pause' ? 'TargetPaused' : 'TargetResumed'],
    errors: WRITE,
  })),
  {
    method: 'get',
    path: `${P}/schema`,
    id: 'getSchema',
    summary: 'The current actions schema (its target URLs and headers are secrets: not for viewers)',
    need: 'variables',
    ok: [200, 'StoredSchema'],
    errors: READ,
  },
  {
    method: 'put',
    path: `${P}/schema`,
    id: 'putSchema',
    summary: 'Validate and store a new actions schema version',
    need: 'admin',
    body: bodySchema('ActionsSchema', actionsSchemaSchema),
    ok: [200, 'SchemaVersion'],
    errors: WRITE,
  },
  {
    method: 'get',
    path: `${P}/variables`,
    id: 'listVariables',
    summary: 'Variable names (never values)',
    need: 'view',
    ok: [200, 'Variables'],
    errors: READ,
  },
  ...(['put', 'patch'] as const).map((method): Operation => ({
    method,
    path: `${P}/variables`,
    id: method === 'put' ? 'setVariables' : 'mergeVariables',
    summary:
      method === 'put' ? 'The given variables become all of them (--mode set)' : 'Set the given variables, keep the others (--mode merge)',
    need: 'variables',
    query: [queryParam('mode', { const: 'append-only-missing' }, 'Add names not yet set, change none.')],
    body: bodySchema('Variables', variablesBody),
    ok: [200, 'Variables'],
    errors: WRITE,
  })),
  {
    method: 'delete',
    path: `${P}/variables/{name}`,
    id: 'deleteVariable',
    summary: 'Delete one variable',
    need: 'variables',
    ok: [204, undefined],
    errors: WRITE,
  },
  {
    method: 'get',
    path: `${P}/stats`,
    id: 'getStats',
    summary: 'Counts by state, due, oldest due age, heartbeat',
    need: 'view',
    ok: [200, 'Stats'],
    errors: READ,
  },
  {
    method: 'get',
    path: `${P}/trends`,
    id: 'getTrends',
    summary:
      'Per minute of the last 24 h, per target and for the project: requests, deliveries, failed attempts, events failed, p50/p99 duration',
    need: 'view',
    query: [
      queryParam('target', name, 'Only this target’s series.'),
      queryParam('series', { enum: ['all', 'project'], default: 'all' }, '`project`: the project’s series only, no target’s.'),
    ],
    ok: [200, 'Trends'],
    errors: READ,
  },
  {
    method: 'get',
    path: '/v1/whoami',
    id: 'whoami',
    summary: 'The caller: system, or a token’s project and role (the console shows only what the role may do)',
    need: 'caller',
    ok: [200, 'Whoami'],
    errors: [401],
  },
  {
    method: 'get',
    path: '/v1/projects',
    id: 'listProjects',
    summary: 'Projects the caller may see: every project with a schema for a system caller, its own for a token',
    need: 'caller',
    ok: [200, 'Projects'],
    errors: [401],
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    id: 'getOpenApi',
    summary: 'This document',
    need: 'caller',
    ok: [200, 'OpenApiDocument'],
    errors: [401],
  },
]

const NEEDS: Record<Operation['need'], string> = {
  view: 'Any token of the project (viewer, deployer, admin) or a system caller.',
  variables: 'A deployer or admin token of the project, or a system caller.',
  admin: 'An admin token of the project, or a system caller.',
  caller: 'Any valid caller.',
}

const PATH_PARAMS: Record<string, Json> = {
  project: name,
  target: name,
  name,
  id: { type: 'string', format: 'uuid' },
}

function operation(op: Operation): Json {
  const params = [...op.path.matchAll(/\{(\w+)\}/g)].map(([, p = '']) => ({ name: p, in: 'path', required: true, schema: PATH_PARAMS[p] }))
  const [status, component] = op.ok
  const answer = component
    ? { description: 'OK', content: { 'application/json': { schema: { $ref: `#/components/schemas/${component}` } } } }
    : { description: 'Done; no body' }
  const problem = { content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } }
  // Any route may fail; one that reads a body may find it too large.
  const statuses = [...op.errors, ...(op.body ? [413] : []), 500]
  const errors = Object.fromEntries(statuses.map(s => [String(s), { description: ERROR_TEXT[s] ?? 'Error', ...problem }]))
  return {
    operationId: op.id,
    summary: op.summary,
    description: `Needs: ${NEEDS[op.need]}`,
    parameters: [...params, ...(op.query ?? [])],
    ...(op.body ? { requestBody: { required: !op.bodyOptional, content: { 'application/json': { schema: op.body } } } } : {}),
    responses: { [String(status)]: answer, ...errors },
  }
}

const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid input: the problem lists each issue by path (never a value)',
  401: 'No valid caller (missing, unknown or revoked token)',
  403: 'The token is of another project, or its role may not',
  404: 'Unknown project, event, target or variable',
  409: 'The event’s state does not allow it now: the detail names the state and what to do',
  413: 'The request body is larger than the admin API reads',
  500: 'Internal error (its detail says nothing of the cause)',
}

/** The OpenAPI 3.1 document of every REST route of the admin API. */
export function openApiDocument(): Json {
  const paths: Record<string, Json> = {}
  for (const op of OPERATIONS) paths[op.path] = { ...paths[op.path], [op.method]: operation(op) }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Actions admin API',
      version: '1',
      description:
        'Operate a project without database credentials. Errors are RFC 9457 problems (application/problem+json). ' +
        'Callers authenticate with `Authorization: Bearer <token>` (a per-project token: admin, deployer or viewer; only its ' +
        'hash is stored, and a revoked one is refused at once) or as a system caller acting on every project: on the deployed ' +
        'IAM function URL (AuthType AWS_IAM) AWS checks a SigV4 signature first; behind the local stack, its printed bootstrap ' +
        'token. The deployed Bearer URL (AuthType NONE) takes tokens only. No answer carries a variable value.',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }, { iam: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A token from `actions tokens create`; only its hash is stored.' },
        iam: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'AWS SigV4 (the function URL’s AWS_IAM auth).' },
      },
      schemas: { ...responseSchemas, ...BODY_DEFS },
    },
  }
}

/** Each operation's method and path as the routes spell them (`:name` segments), for the test that every route is documented. */
export function documentedRoutes(): Array<{ method: string; path: string }> {
  return OPERATIONS.map(op => ({ method: op.method.toUpperCase(), path: op.path.replace(/\{(\w+)\}/g, ':$1') }))
}

// The JSON Schemas (2020-12, as OpenAPI 3.1 uses) of the REST answers: one per shape of
// lib/shapes.ts and per route's own answer. Request bodies come from the zod schemas that
// validate them (lib/admin/openapi.ts), so a body the document allows is a body the route takes.
import { COUNTED_RESOLVED_EVENTS } from '../../db/admin-events.js'
import { FAILED_COUNT_CAP } from '../../db/admin-recent.js'
import { MAX_TREND_TARGETS, TREND_BUCKETS_MS, TREND_MINUTES } from '../../db/trends.js'
import { EVENT_STATES } from '../../shapes.js'

type Schema = Record<string, unknown>

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` })
const str: Schema = { type: 'string' }
const int: Schema = { type: 'integer' }
const num: Schema = { type: 'number', minimum: 0 }
const bool: Schema = { type: 'boolean' }
const time: Schema = { type: 'string', format: 'date-time' }
const nullable = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] })

/** A closed object: every property required (the shapes always write every field), none other allowed. */
export function object(properties: Record<string, Schema>, optional: readonly string[] = []): Schema {
  return {
    type: 'object',
    properties,
    required: Object.keys(properties).filter(k => !optional.includes(k)),
    additionalProperties: false,
  }
}

const event = {
  id: { type: 'string', format: 'uuid' },
  project: str,
  state: ref('EventState'),
  target: str,
  trigger: str,
  attempts: { type: 'integer', minimum: 0 },
  createdAt: time,
  lastStateChange: time,
  visibleAt: time,
  resolvedAt: nullable(time),
  lastError: { ...nullable(str), description: 'The start of the last attempt’s error, variable values redacted.' },
}

/** The answers' schemas, by component name. */
export const responseSchemas: Record<string, Schema> = {
  Problem: {
    ...object({ type: str, title: str, status: { type: 'integer', minimum: 400, maximum: 599 }, detail: str }, ['detail']),
    // RFC 9457 allows extension members.
    additionalProperties: true,
    description: 'An RFC 9457 problem (application/problem+json). Its detail names paths and limits, never a value.',
  },
  EventState: { type: 'string', enum: [...EVENT_STATES] },
  Event: object(event),
  Attempt: object({ ok: bool, code: int, errorMessage: str, response: str, durationMs: int }, [
    'code',
    'errorMessage',
    'response',
    'durationMs',
  ]),
  EventDetail: object({
    ...event,
    transactionId: { type: 'string', format: 'uuid' },
    stage: nullable(str),
    priority: int,
    schemaVersion: int,
    payload: { type: 'object' },
    log: { type: 'array', items: ref('Attempt') },
    logDropped: { type: 'integer', minimum: 0 },
    identityId: nullable({ type: 'string', format: 'uuid' }),
    ipAddress: nullable(str),
    userAgent: nullable(str),
  }),
  EventPage: object({
    events: { type: 'array', items: ref('Event'), maxItems: 1000 },
    nextCursor: { ...nullable(str), description: 'Pass as `cursor` for the next page; null on the last page.' },
  }),
  EventChange: object({ id: { type: 'string', format: 'uuid' }, action: { enum: ['retry', 'stop'] }, signalled: bool }),
  BulkResult: object({
    action: { enum: ['retry', 'stop'] },
    dryRun: { ...bool, description: 'True: the events were only counted; none changed.' },
    matched: { type: 'integer', minimum: 0, description: 'Events the filter matched (at most limit); changed + skipped unless a dry run.' },
    changed: { type: 'integer', minimum: 0 },
    skipped: {
      type: 'integer',
      minimum: 0,
      description: 'Matched but left alone: changed by someone else between the pick and the update (a dispatcher claimed it).',
    },
    limit: { type: 'integer', minimum: 1 },
    limitReached: { ...bool, description: 'More events may match: the same call again takes the oldest that still do.' },
    signalled: bool,
  }),
  EnqueueResult: object({
    eventIds: { type: 'array', items: { type: 'string', format: 'uuid' } },
    written: { type: 'integer', minimum: 0 },
    unmatched: { type: 'array', items: { type: 'integer', minimum: 0 } },
  }),
  Target: object({
    target: str,
    inSchema: bool,
    state: { enum: ['running', 'paused'] },
    pause: nullable(
      object({ kind: { enum: ['down', 'misconfigured', 'operator'] }, label: str, since: nullable(time), probeAt: nullable(time) }),
    ),
    consecutiveFailures: { type: 'integer', minimum: 0 },
    failingSince: nullable(time),
    due: { type: 'integer', minimum: 0 },
    oldestDueAgeSeconds: num,
    lastRequestAt: { ...nullable(time), description: 'The minute of its last request; null: it never sent one.' },
    recent: ref('RecentOutcomes'),
  }),
  RecentOutcomes: {
    ...object({
      succeeded: { type: 'integer', minimum: 0 },
      failed: { type: 'integer', minimum: 0 },
      successRate: { ...nullable({ type: 'number', minimum: 0, maximum: 1 }), description: 'Null: no recent deliveries.' },
    }),
    description:
      'The target’s events resolved within recentWindow: delivered (succeed) and failed for good; stopped ones are not counted. ' +
      'successRate = succeeded / (succeeded + failed).',
  },
  Targets: object({
    targets: { type: 'array', items: ref('Target') },
    recentWindow: {
      ...object({ seconds: { type: 'integer', minimum: 1 }, maxEvents: { type: 'integer', minimum: 1 }, limitReached: bool }),
      description: 'What `recent` is computed over: the project’s newest maxEvents events resolved in the last `seconds`.',
    },
  }),
  TargetPaused: object({ target: str, state: { const: 'paused' }, pausedAt: time }),
  TargetResumed: object({ target: str, state: { const: 'running' }, wasPaused: bool, signalled: bool }),
  StoredSchema: object({ version: { type: 'integer', minimum: 1 }, schema: { type: 'object' } }),
  SchemaVersion: object({ version: { type: 'integer', minimum: 1 } }),
  Variable: object({ name: str, updatedAt: { ...time, description: 'When its value last changed.' } }),
  Variables: {
    ...object({ variables: { type: 'array', items: ref('Variable') } }),
    description: 'Names and update times only: no answer of this API carries a variable value.',
  },
  Stats: object({
    project: str,
    counts: object(Object.fromEntries(EVENT_STATES.map(s => [s, { type: 'integer', minimum: 0 }]))),
    countsComplete: {
      ...bool,
      description: `False: succeed, failed and stopped were counted over the newest ${COUNTED_RESOLVED_EVENTS} resolved events (lower bounds).`,
    },
    due: { type: 'integer', minimum: 0, description: 'Every due event of the project, whatever its target (the sum of the targets’ due).' },
    dueAtPausedTargets: { type: 'integer', minimum: 0, description: 'Of those, the ones at paused targets.' },
    oldestDueAgeSeconds: num,
    failedLast24h: {
      type: 'integer',
      minimum: 0,
      maximum: FAILED_COUNT_CAP,
      description: `Events in state failed whose failure is under 24 h old, counted up to ${FAILED_COUNT_CAP}.`,
    },
    failedLast24hCapped: { ...bool, description: 'The count stopped at its cap: more failed.' },
    lastProgressAt: nullable(time),
    lastProgressAgeSeconds: nullable(num),
  }),
  Whoami: object({ kind: { enum: ['system', 'token'] }, project: str, role: { enum: ['admin', 'deployer', 'viewer'] } }, [
    'project',
    'role',
  ]),
  Projects: object({ projects: { type: 'array', items: str } }),
  TrendPoint: object({
    minute: time,
    requests: { type: 'integer', minimum: 0, description: 'Requests (batches) posted in the minute.' },
    delivered: { type: 'integer', minimum: 0, description: 'Events delivered.' },
    failedAttempts: { type: 'integer', minimum: 0, description: 'Event attempts that failed.' },
    eventsFailed: { type: 'integer', minimum: 0, description: 'Events that failed for good.' },
    p50Ms: { ...nullable(int), description: 'Median request duration: the upper bound of its bucket (bucketsMs).' },
    p99Ms: { ...nullable(int), description: '99th percentile request duration, the same way.' },
  }),
  TrendSeries: object({
    target: { ...nullable(str), description: 'Null: the project’s series, every target merged.' },
    points: { type: 'array', items: ref('TrendPoint'), description: 'Minutes with a request, oldest first; others read as zeros.' },
  }),
  Trends: object({
    from: time,
    to: time,
    minutes: { const: TREND_MINUTES },
    bucketsMs: { type: 'array', items: int, description: `Upper bounds of the duration buckets: ${TREND_BUCKETS_MS.join(', ')}.` },
    project: ref('TrendSeries'),
    targets: { type: 'array', items: ref('TrendSeries'), maxItems: MAX_TREND_TARGETS },
    targetsLeftOut: {
      type: 'integer',
      minimum: 0,
      description: `Targets past the first ${MAX_TREND_TARGETS} by name, left out (?target= reads one).`,
    },
  }),
  OpenApiDocument: { type: 'object', required: ['openapi', 'paths'] },
}

import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import { describeIssues } from './config.js'
import { getCurrentSchema } from './db/schemas.js'
import { insertEvents, type NewEvent } from './db/events.js'
import type { Deps } from './deps.js'
import { eventPayloadSchema } from './schema/payload.js'

/** Events accepted in one request; larger batches belong in several invocations. */
export const MAX_EVENTS_PER_REQUEST = 10_000

export const enqueueRequestSchema = z.object({
  project: z.string().min(1),
  transactionId: z.uuid(),
  stage: z.string().min(1).optional(),
  identityId: z.uuid().optional(),
  ipAddress: z.string().max(64).optional(),
  userAgent: z.string().max(1024).optional(),
  events: z.array(z.object({
    id: z.uuid().optional(),
    trigger: z.string().min(1),
    payload: eventPayloadSchema,
  }).strict()).max(MAX_EVENTS_PER_REQUEST, `expected at most ${MAX_EVENTS_PER_REQUEST} events`),
}).strict()

export type EnqueueRequest = z.input<typeof enqueueRequestSchema>
export type EnqueueResult = { eventIds: string[] }

/** Thrown for a request that cannot be written; each problem names the field (and the event index). Nothing was written. */
export class EnqueueValidationError extends Error {
  override name = 'EnqueueValidationError'
  constructor(readonly problems: string[]) {
    super(`Invalid enqueue request:\n${problems.map(p => `  - ${p}`).join('\n')}`)
  }
}

/** Validates the whole request, writes its events in one statement, then signals the project's queue. */
export async function enqueue(deps: Deps, input: unknown): Promise<EnqueueResult> {
  const parsed = enqueueRequestSchema.safeParse(input)
  if (!parsed.success) throw new EnqueueValidationError(describeIssues(parsed.error.issues))
  const req = parsed.data

  const current = await getCurrentSchema(deps.db, req.project)
  if (!current) throw new EnqueueValidationError([`project: unknown project "${req.project}" (no actions schema stored)`])

  const problems: string[] = []
  const events: NewEvent[] = req.events.map((e, i) => {
    const trigger = current.schema.triggers[e.trigger]
    if (!trigger) problems.push(`events.${i}.trigger: unknown trigger "${e.trigger}"`)
    return { id: e.id ?? randomUUID(), trigger: e.trigger, target: trigger?.target ?? '', priority: trigger?.priority ?? 0, payload: e.payload }
  })
  if (problems.length) throw new EnqueueValidationError(problems)

  const written = await insertEvents(deps.db, {
    project: req.project,
    transactionId: req.transactionId,
    stage: req.stage ?? null,
    schemaVersion: current.version,
    identityId: req.identityId ?? null,
    ipAddress: req.ipAddress ?? null,
    userAgent: req.userAgent ?? null,
  }, events)
  deps.metrics.forProject(req.project).enqueued(written.length)

  if (events.length > 0) {
    try {
      await deps.signals.send(req.project)
    } catch (error) {
      // The events are committed; the sweeper re-drives them within a minute.
      deps.log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { project: req.project, events: written.length, error })
    }
  }
  return { eventIds: events.map(e => e.id) }
}

import { z } from 'zod'
import type { JsonObject, JsonValue } from './json.js'

// Upstream's `ActionsPayload` (`@contember/schema`, and the newer `nodes` from its TriggerPayloadBuilder):
// what a content API fires for one entity change. test/types/upstream.ts proves the match at compile time.
// Values are JSON by the time zod sees them (enqueue inspects the request first), so zod checks shape only.

const jsonObject: z.ZodType<JsonObject> = z.record(
  z.string(),
  z.custom<JsonValue>(() => true),
)
const primary = z.union([z.string(), z.number()])

/** One step from the watched root entity to the changed one (upstream's `EntityEventPathNode`). */
const pathNode = z.object({ relation: z.string(), entity: z.string(), id: primary }).strict()

const common = {
  entity: z.string().min(1),
  id: primary,
  selection: jsonObject.optional(),
  path: z.array(z.string()).optional(),
  nodes: z.array(pathNode).optional(),
}
const junction = { relation: z.string().min(1), inverseId: primary }

const baseShapes = {
  create: { ...common, operation: z.literal('create'), values: jsonObject },
  update: { ...common, operation: z.literal('update'), values: jsonObject, old: jsonObject.optional() },
  delete: { ...common, operation: z.literal('delete') },
  junction_connect: { ...common, ...junction, operation: z.literal('junction_connect') },
  junction_disconnect: { ...common, ...junction, operation: z.literal('junction_disconnect') },
}

/** Upstream's `BaseEventPayload`: one change, as a watch payload lists them. */
export const baseEventSchema = z.discriminatedUnion('operation', [
  z.object(baseShapes.create).strict(),
  z.object(baseShapes.update).strict(),
  z.object(baseShapes.delete).strict(),
  z.object(baseShapes.junction_connect).strict(),
  z.object(baseShapes.junction_disconnect).strict(),
])

/** Upstream's `WatchEventPayload`. */
export const watchEventSchema = z
  .object({
    operation: z.literal('watch'),
    trigger: z.string().min(1),
    entity: z.string().min(1),
    id: primary,
    events: z.array(baseEventSchema),
    selection: jsonObject.optional(),
  })
  .strict()

// A basic trigger's payload carries its trigger's name (upstream's types require it); `optional` keeps
// accepting producers written before that. test/types/upstream.ts checks both against upstream's types.
const withOptionalTrigger = <T extends z.ZodRawShape>(shape: T) => z.object({ ...shape, trigger: z.string().min(1).optional() }).strict()

/** What enqueue accepts for a named trigger: upstream's payloads, and basic ones without their `trigger` too. */
export const eventPayloadSchema = z.discriminatedUnion('operation', [
  withOptionalTrigger(baseShapes.create),
  withOptionalTrigger(baseShapes.update),
  withOptionalTrigger(baseShapes.delete),
  withOptionalTrigger(baseShapes.junction_connect),
  withOptionalTrigger(baseShapes.junction_disconnect),
  watchEventSchema,
])

/**
 * A mutation from a content API that does not know trigger names: enqueue evaluates the project's
 * basic triggers against it (lib/enqueue/fanout.ts).
 */
export const mutationSchema = z.discriminatedUnion('operation', [
  z.object({ operation: z.literal('create'), entity: z.string().min(1), id: primary, values: jsonObject.optional() }).strict(),
  z
    .object({
      operation: z.literal('update'),
      entity: z.string().min(1),
      id: primary,
      values: jsonObject.optional(),
      old: jsonObject.optional(),
    })
    .strict(),
  z.object({ operation: z.literal('delete'), entity: z.string().min(1), id: primary }).strict(),
])

export type Mutation = z.infer<typeof mutationSchema>

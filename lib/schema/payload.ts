import { z } from 'zod'

// The upstream `ActionsPayload` union: what a content API fires for one entity change.

const primary = z.union([z.string(), z.number().int()])
const jsonObject = z.record(z.string(), z.unknown())
const common = {
  entity: z.string().min(1),
  id: primary,
  selection: jsonObject.optional(),
  path: z.array(z.string()).optional(),
}

const createEvent = z.object({ ...common, operation: z.literal('create'), values: jsonObject }).strict()
const updateEvent = z.object({ ...common, operation: z.literal('update'), values: jsonObject, old: jsonObject.optional() }).strict()
const deleteEvent = z.object({ ...common, operation: z.literal('delete') }).strict()
const junctionConnect = z.object({ ...common, operation: z.literal('junction_connect'), relation: z.string().min(1), inverseId: primary }).strict()
const junctionDisconnect = z.object({ ...common, operation: z.literal('junction_disconnect'), relation: z.string().min(1), inverseId: primary }).strict()

const baseEvent = z.discriminatedUnion('operation', [createEvent, updateEvent, deleteEvent, junctionConnect, junctionDisconnect])

const watchEvent = z.object({
  operation: z.literal('watch'),
  entity: z.string().min(1),
  id: primary,
  trigger: z.string().min(1),
  events: z.array(baseEvent),
  selection: jsonObject.optional(),
}).strict()

export const eventPayloadSchema = z.discriminatedUnion('operation', [createEvent, updateEvent, deleteEvent, junctionConnect, junctionDisconnect, watchEvent])

export type EventPayload = z.infer<typeof eventPayloadSchema>

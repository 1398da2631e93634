import { z } from 'zod'
import { describeIssues } from '../config.js'

// The upstream `Actions.Schema` shape. `.strict()` everywhere: an unknown key is a typo an operator must hear about.

const jsonValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonValue), z.record(z.string(), jsonValue)]),
)
const jsonObject = z.record(z.string(), jsonValue)
/** Upstream selection nodes are GraphQL-like trees; kept as JSON, the dispatcher never reads them. */
const selection = z.array(jsonValue)

const positiveInt = z.number({ message: 'expected a positive integer' }).int('expected a positive integer').positive('expected a positive integer')

export const webhookTargetSchema = z.object({
  type: z.literal('webhook'),
  name: z.string().min(1),
  url: z.string().min(1, 'expected a URL'),
  headers: z.record(z.string(), z.string()).optional(),
  body: jsonObject.optional(),
  payloadPath: z.array(z.string().min(1)).min(1).optional(),
  timeoutMs: positiveInt.optional(),
  maxAttempts: positiveInt.optional(),
  initialRepeatIntervalMs: positiveInt.optional(),
  batchSize: positiveInt.max(1000, 'expected at most 1000').optional(),
  signingSecret: z.string().min(1).optional(),
}).strict()

const triggerBase = {
  name: z.string().min(1),
  target: z.string().min(1),
  priority: z.number().int('expected an integer').optional(),
  entity: z.string().min(1),
  selection: selection.optional(),
}

export const basicTriggerSchema = z.object({
  ...triggerBase,
  type: z.literal('basic'),
  create: z.boolean(),
  delete: z.boolean(),
  update: z.union([z.boolean(), z.array(z.string())]),
}).strict()

export const watchTriggerSchema = z.object({
  ...triggerBase,
  type: z.literal('watch'),
  watch: selection,
}).strict()

export const triggerSchema = z.discriminatedUnion('type', [basicTriggerSchema, watchTriggerSchema])

export const actionsSchemaSchema = z.object({
  targets: z.record(z.string(), z.discriminatedUnion('type', [webhookTargetSchema])),
  triggers: z.record(z.string(), triggerSchema),
}).strict().superRefine((schema, ctx) => {
  // Names are the map keys upstream; a mismatch or a dangling target would only surface at dispatch time.
  for (const [key, target] of Object.entries(schema.targets)) {
    if (target.name !== key) ctx.addIssue({ code: 'custom', path: ['targets', key, 'name'], message: `expected "${key}" (the key of the target)` })
  }
  for (const [key, trigger] of Object.entries(schema.triggers)) {
    if (trigger.name !== key) ctx.addIssue({ code: 'custom', path: ['triggers', key, 'name'], message: `expected "${key}" (the key of the trigger)` })
    if (!(trigger.target in schema.targets)) ctx.addIssue({ code: 'custom', path: ['triggers', key, 'target'], message: `unknown target "${trigger.target}"` })
  }
})

export type ActionsSchema = z.infer<typeof actionsSchemaSchema>
export type WebhookTarget = z.infer<typeof webhookTargetSchema>
export type Trigger = z.infer<typeof triggerSchema>

/** Target option defaults (upstream `Actions.WebhookTarget`). */
export const TARGET_DEFAULTS = { timeoutMs: 30_000, maxAttempts: 10, initialRepeatIntervalMs: 5_000, batchSize: 1 } as const

/** Thrown when a stored or supplied actions schema is invalid; each problem names its path. */
export class SchemaValidationError extends Error {
  override name = 'SchemaValidationError'
  constructor(readonly problems: string[]) {
    super(`Invalid actions schema:\n${problems.map(p => `  - ${p}`).join('\n')}`)
  }
}

/** Validates an actions schema; throws {@link SchemaValidationError} listing every problem by path. */
export function parseActionsSchema(input: unknown): ActionsSchema {
  const parsed = actionsSchemaSchema.safeParse(input)
  if (!parsed.success) throw new SchemaValidationError(describeIssues(parsed.error.issues))
  return parsed.data
}

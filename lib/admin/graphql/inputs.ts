// The arguments of the Actions API, bounded. GraphQL has checked their types; these add the limits
// and the formats it cannot say (a UUID, a variable name), each refusal naming the argument, never
// quoting a value (a variable's value is a secret).
import { z } from 'zod'
import { MAX_VARIABLE_CHARS } from '../../schema/limits.js'
import { userError } from './user-error.js'

/** Events per page when `limit` is not given: upstream's default. */
export const DEFAULT_EVENT_LIMIT = 100
/** Events per page at most: upstream documents 10000 ("Max 10000") and the CLI's listings stop there too. */
export const MAX_EVENT_LIMIT = 10_000
/**
 * Events skipped at most. Postgres reads and drops every skipped row, so an unbounded offset is a
 * scan of the whole table per request; a million rows is 100 pages of the largest size.
 */
export const MAX_EVENT_OFFSET = 1_000_000

// A null argument is what a client sends for an unset $variable (upstream's tooling passes `offset: $offset` unset).
const intArg = (max: number, fallback: number) =>
  z
    .number()
    .int()
    .min(0)
    .max(max)
    .nullish()
    .transform(v => v ?? fallback)

/** failedEvents / eventsToProcess / eventsInProcessing: `args: { offset, limit }`, both optional. */
export const eventArgs = z
  .object({
    args: z
      .object({ offset: intArg(MAX_EVENT_OFFSET, 0), limit: intArg(MAX_EVENT_LIMIT, DEFAULT_EVENT_LIMIT) })
      .nullish()
      .transform(a => a ?? { offset: 0, limit: DEFAULT_EVENT_LIMIT }),
  })
  .transform(a => a.args)

/**
 * A `UUID` argument as upstream's scalar takes it: the usual form, or its 32 hex digits without dashes
 * (upstream's client and engine accept both and find the same event), given on in the usual form.
 */
const uuid = z
  .string()
  .transform(s =>
    /^[0-9a-f]{32}$/i.test(s) ? `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}` : s,
  )
  .pipe(z.uuid())

/** event / stopEvent: `id: UUID!`. */
export const uuidArg = z.object({ id: uuid })

/** retryEvent: `id: UUID!` and `force` (an extension: also a delivered or stopped event), false when not given. */
export const retryArgs = z.object({
  id: uuid,
  force: z
    .boolean()
    .nullish()
    .transform(f => f ?? false),
})

/** Names the templates can substitute (docs/delivery.md), as the CLI's `variables set` accepts them. */
const VARIABLE_NAME = /^[A-Za-z0-9_]+$/
/** Variables per call at most: far above any project's, and it bounds the one INSERT's arrays. */
export const MAX_VARIABLES = 1_000

const variableInput = z.object({
  name: z.string().regex(VARIABLE_NAME, 'a name has only letters, digits and _'),
  value: z
    .string()
    .max(MAX_VARIABLE_CHARS, `a value has at most ${MAX_VARIABLE_CHARS} characters`)
    // Postgres text cannot hold NUL: refused here with a message instead of a driver error.
    .refine(v => !v.includes('\u0000'), 'a value may not contain NUL'),
})

/** setVariables: `args: { variables, mode }`, the mode in the CLI's spelling (MERGE when not given). */
export const setVariablesArgs = z
  .object({
    args: z.object({
      variables: z.array(variableInput).max(MAX_VARIABLES, `at most ${MAX_VARIABLES} variables`),
      mode: z
        .enum(['MERGE', 'SET', 'APPEND_ONLY_MISSING'])
        .nullish()
        .transform(m => (m === 'SET' ? 'set' : m === 'APPEND_ONLY_MISSING' ? 'append-only-missing' : 'merge')),
    }),
  })
  .transform(a => a.args)

/** Parses a resolver's arguments; a refusal is a BAD_USER_INPUT error naming each path and rule, never a value. */
export function parseArgs<T extends z.ZodType>(schema: T, args: unknown): z.output<T> {
  const parsed = schema.safeParse(args)
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues.slice(0, 10).map(i => `${i.path.join('.') || 'arguments'}: ${i.message}`)
  throw userError(`Invalid arguments: ${problems.join('; ')}`, 'BAD_USER_INPUT')
}

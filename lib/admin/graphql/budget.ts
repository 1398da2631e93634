// What one answer of the Actions API may weigh. graphql-js builds the whole answer in memory before
// it is sent: a viewer asking failedEvents(args: {limit: 10000}) { payload log } ten times under
// aliases over events of 240 KB built an answer of 140 MB. The cost is counted twice: before
// execution, the events a document asks for in all (its listings' limits); during it, the stored
// bytes of the events a listing would return, before they are read. The serialized answer is
// checked last; past its bound the answer is an error, never a cut one.
import { Kind, type DocumentNode, type SelectionNode, type ValueNode } from 'graphql'
import { userError } from './user-error.js'
import { DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT } from './inputs.js'

/** The root fields that list events, each taking `args: { offset, limit }`. */
const LISTINGS: ReadonlySet<string> = new Set(['failedEvents', 'eventsToProcess', 'eventsInProcessing'])

/**
 * Events a document asks for at most, over all its listings (aliases included): upstream's largest
 * page. A document asking for more is refused before it runs, whatever the events weigh.
 */
export const MAX_REQUESTED_EVENTS = MAX_EVENT_LIMIT

/** The bytes an answer may still spend; shared by the resolvers of one request. */
export type AnswerBudget = { left: number; readonly max: number }

/** A budget of `max` bytes. */
export const answerBudget = (max: number): AnswerBudget => ({ left: max, max })

/** The error of an answer past its bound: what to do, never a byte of the answer. */
export const tooLarge = (max: number) =>
  userError(
    `Answer refused: it would be larger than ${max} bytes; ask for fewer events (limit, offset) or leave out payload and log`,
    'ANSWER_TOO_LARGE',
  )

/** Spends `bytes` of `budget`, or throws ANSWER_TOO_LARGE (nothing is spent then). */
export function spend(budget: AnswerBudget, bytes: number): void {
  if (bytes > budget.left) throw tooLarge(budget.max)
  budget.left -= bytes
}

/**
 * The events the document's operations ask for in all, the largest over its operations: each
 * listing's `limit` (a literal or a variable; the default when not given). A limit that is not a
 * number counts as the default here, one past the largest page as that page; the resolver refuses both.
 */
export function requestedEvents(doc: DocumentNode, variables: Readonly<Record<string, unknown>> | null | undefined): number {
  const fragments = new Map(doc.definitions.flatMap(d => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])))
  const vars = variables ?? {}
  let most = 0
  for (const d of doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue
    let sum = 0
    const seen = new Set<string>()
    // Root fields may sit in fragments; each fragment is counted once per operation (validation refuses cycles).
    const walk = (selections: readonly SelectionNode[]) => {
      for (const sel of selections) {
        if (sel.kind === Kind.FIELD) {
          if (LISTINGS.has(sel.name.value)) sum += limitOf(sel.arguments?.find(a => a.name.value === 'args')?.value, vars)
        } else if (sel.kind === Kind.INLINE_FRAGMENT) walk(sel.selectionSet.selections)
        else if (!seen.has(sel.name.value)) {
          seen.add(sel.name.value)
          const fragment = fragments.get(sel.name.value)
          if (fragment) walk(fragment.selectionSet.selections)
        }
      }
    }
    walk(d.selectionSet.selections)
    most = Math.max(most, sum)
  }
  return most
}

function limitOf(args: ValueNode | undefined, vars: Readonly<Record<string, unknown>>): number {
  if (args === undefined) return DEFAULT_EVENT_LIMIT
  let limit: unknown
  if (args.kind === Kind.VARIABLE) {
    const given = vars[args.name.value]
    limit = typeof given === 'object' && given !== null && 'limit' in given ? given.limit : undefined
  } else if (args.kind === Kind.OBJECT) {
    const field = args.fields.find(f => f.name.value === 'limit')?.value
    if (field?.kind === Kind.INT) limit = Number(field.value)
    else if (field?.kind === Kind.VARIABLE) limit = vars[field.name.value]
  }
  // A limit past the largest page counts as that page: the resolver refuses it, naming the argument.
  return typeof limit === 'number' && Number.isSafeInteger(limit) && limit >= 0 ? Math.min(limit, MAX_EVENT_LIMIT) : DEFAULT_EVENT_LIMIT
}

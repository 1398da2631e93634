// The one kind of error a resolver or a check answers the caller with. It lives apart from the access
// rules so that the checks on a document (budget.ts, inputs.ts) and the access rules, which read the
// budget's type, do not import each other.
import { GraphQLError } from 'graphql'

/** An error meant for the caller: its message is safe to answer with (names and limits, never a value). */
export function userError(message: string, code: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code } })
}

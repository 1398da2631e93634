// Upstream's GraphQL Actions API (engine-actions' actions.graphql.ts): the same operations, types and
// names, so `contember actions:*` and the project templates' variable scripts work unchanged. Two
// fields differ on purpose, each saying why in its description; retryEvent's `force` is an extension.
import { buildSchema, type GraphQLSchema } from 'graphql'

/** The SDL of the Actions API. */
export const ACTIONS_SDL = `
scalar DateTime
scalar Json
scalar UUID

schema {
  query: Query
  mutation: Mutation
}

type Query {
  failedEvents(args: EventArgs): [Event!]!
  eventsToProcess(args: EventArgs): [Event!]!
  eventsInProcessing(args: EventArgs): [Event!]!
  event(id: UUID!): Event
  "Values only to the project's admin; anyone else reads [redacted]."
  variables: [Variable!]!
}

type Mutation {
  "Signals the project: its dispatch takes due events at once (ok is false when the signal could not be sent)."
  processBatch: ProcessBatchResponse!
  """
  ok is false for an id the project does not have. A CONFLICT error while the event is being delivered
  (processing), and for a delivered (succeed) or stopped one unless force is true (an extension).
  """
  retryEvent(id: UUID!, force: Boolean): RetryEventResponse!
  "ok is false for an id the project does not have; a CONFLICT error for a delivered (succeed) or stopped one."
  stopEvent(id: UUID!): StopEventResponse!
  setVariables(args: SetVariablesArgs!): SetVariablesResponse!
}

input EventArgs {
  offset: Int
  "Default 100, at most 10000; offset at most 1000000."
  limit: Int
}

type Event {
  id: UUID!
  transactionId: UUID!
  identityId: UUID
  ipAddress: String
  userAgent: String
  createdAt: DateTime!
  lastStateChange: DateTime!
  resolvedAt: DateTime
  visibleAt: DateTime
  numRetries: Int!
  state: EventState!
  "Null for an event enqueued without a stage (upstream always has one)."
  stage: String
  target: String!
  payload: Json!
  "The attempt log, its receiver text redacted with the project's variables."
  log: Json!
}

enum EventState {
  created
  retrying
  processing
  succeed
  failed
  stopped
}

type ProcessBatchResponse {
  ok: Boolean!
}

type RetryEventResponse {
  ok: Boolean!
}

type StopEventResponse {
  ok: Boolean!
}

input SetVariablesArgs {
  variables: [VariableInput!]!
  mode: SetVariablesMode
}

"""
What happens to the variables already stored: MERGE (the default) overwrites the given names and keeps
the rest; SET makes the given list all the variables; APPEND_ONLY_MISSING adds names not stored yet.
"""
enum SetVariablesMode {
  MERGE
  SET
  APPEND_ONLY_MISSING
}

input VariableInput {
  name: String!
  value: String!
}

type SetVariablesResponse {
  ok: Boolean!
}

type Variable {
  name: String!
  value: String!
}
`

let built: GraphQLSchema | undefined

/** The executable schema, built once per cold start (resolvers come as the root value). */
export function actionsSchema(): GraphQLSchema {
  built ??= buildSchema(ACTIONS_SDL)
  return built
}

// Upstream's GraphQL Actions API at POST /actions/:project, on the reference graphql
// package: the body is bounded, parsed, measured (graphql/bounds.ts, graphql/budget.ts), validated,
// then executed against the project of the URL. Answers follow upstream's engine: 200 with `{ data,
// errors }` when there is data; 400 with `{ data: null, errors: [{ message, extensions: { code } }] }`
// for a request refused before or by its resolvers (a syntax or validation error, a bound, a forbidden
// operation), 500 when an unexpected error left no data.
import { execute, GraphQLError, parse, validate, type ExecutionResult, type GraphQLFormattedError } from 'graphql'
import { z } from 'zod'
import { exceededBound, MAX_QUERY_CHARS, MAX_QUERY_TOKENS } from './graphql/bounds.js'
import { answerBudget, MAX_REQUESTED_EVENTS, requestedEvents, tooLarge } from './graphql/budget.js'
import { rootValue } from './graphql/resolvers.js'
import { actionsSchema } from './graphql/schema.js'
import type { GraphqlContext } from './graphql/access.js'
import { ProblemError, type Route, type RouteContext, type RouteResult } from './types.js'

/** Validation errors answered at most: a document with many mistakes gets the first ones. */
const MAX_VALIDATION_ERRORS = 20

/** A GraphQL-over-HTTP request body, as upstream's GraphQlClient sends it. */
const requestBody = z.object({
  query: z.string(),
  variables: z.record(z.string(), z.unknown()).nullish(),
  operationName: z.string().max(256).nullish(),
  extensions: z.record(z.string(), z.unknown()).nullish(),
})

type GraphqlAnswer = { data?: unknown; errors?: readonly GraphQLFormattedError[] }

const refused = (status: number, message: string, code: string): RouteResult => ({
  status,
  body: { data: null, errors: [{ message, extensions: { code } }] } satisfies GraphqlAnswer,
})

/** POST /actions/:project: upstream's Actions API; each operation checks the caller's role itself. */
export const graphqlRoute: Route = {
  method: 'POST',
  path: '/actions/:project',
  need: 'view',
  handle: async ctx => {
    const project = authorizedProject(ctx)
    const body = requestBody.safeParse(ctx.body)
    if (!body.success) {
      const problems = body.error.issues.slice(0, 5).map(i => `${i.path.join('.') || 'body'}: ${i.message}`)
      return refused(400, `Not a GraphQL request: ${problems.join('; ')}`, 'BAD_REQUEST')
    }
    const { query, variables, operationName } = body.data
    if (query.length > MAX_QUERY_CHARS) return refused(400, `Query refused: more than ${MAX_QUERY_CHARS} characters`, 'QUERY_TOO_COMPLEX')
    let doc
    try {
      doc = parse(query, { maxTokens: MAX_QUERY_TOKENS })
    } catch (e) {
      if (!(e instanceof GraphQLError)) throw e
      // The message quotes the offending token, and a string token may be a variable's value: its kind only.
      const error = e.toJSON()
      const message = error.message.replace(/\b(String|BlockString) ".*"/s, '$1')
      return failed(400, [{ ...error, message, extensions: { code: 'GRAPHQL_PARSE_FAILED' } }])
    }
    const crossed = exceededBound(doc)
    if (crossed) return refused(400, `Query refused: ${crossed}`, 'QUERY_TOO_COMPLEX')
    const invalid = validate(actionsSchema(), doc, undefined, { maxErrors: MAX_VALIDATION_ERRORS })
    if (invalid.length)
      return failed(
        400,
        invalid.map(e => withoutLiteral({ ...e.toJSON(), extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })),
      )
    // Counted before any resolver runs: what the listings ask for in all, whatever the events weigh.
    const asked = requestedEvents(doc, variables)
    if (asked > MAX_REQUESTED_EVENTS)
      return refused(400, `Query refused: it asks for ${asked} events in all, more than ${MAX_REQUESTED_EVENTS}`, 'QUERY_TOO_COMPLEX')
    const max = ctx.deps.config.GRAPHQL_MAX_ANSWER_BYTES
    const contextValue: GraphqlContext = { deps: ctx.deps, principal: ctx.principal, project, budget: answerBudget(max) }
    const result = await execute({
      schema: actionsSchema(),
      document: doc,
      rootValue,
      contextValue,
      variableValues: variables,
      operationName,
    })
    const out = answer(result, ctx)
    // The last check, on the bytes the router sends (it serializes the same body again: at most
    // `max` bytes, cheaper than a second path through the router): past the bound the answer is an
    // error, never a cut one.
    if (Buffer.byteLength(JSON.stringify(out.body), 'utf8') > max) {
      const error = tooLarge(max)
      return failed(400, [{ message: error.message, extensions: error.extensions }])
    }
    return out
  },
}

/** A failed request as upstream's engine answers it: no data, the errors, and the status. */
const failed = (status: number, errors: readonly GraphQLFormattedError[]): RouteResult => ({
  status,
  body: { data: null, errors } satisfies GraphqlAnswer,
})

/**
 * The project of the URL, checked again against a project token: the router authorizes the route's
 * need, and this handler must not trust that a caller reached it only through the router.
 */
function authorizedProject(ctx: RouteContext): string {
  const project = ctx.params.project
  if (!project) throw new ProblemError(404, 'Not Found')
  if (ctx.principal.kind === 'token' && ctx.principal.project !== project)
    throw new ProblemError(403, 'Forbidden', 'the token is for another project')
  return project
}

/**
 * The result as JSON, with upstream's status: 200 when there is data, else 500 when an error was not
 * meant, 400 when every one was (a refusal, a forbidden operation, a variable that does not coerce).
 * An error a resolver meant (a GraphQLError of its own) is answered as it is; any other (a driver's,
 * the queue's) may quote a statement or a value, so it is logged by name and answered as an internal error.
 */
function answer(result: ExecutionResult, ctx: RouteContext): { status: number; body: GraphqlAnswer } {
  if (!result.errors?.length) return { status: 200, body: { data: result.data } }
  let internal = false
  const errors = result.errors.map(e => {
    const cause = e.originalError
    if (cause === undefined || cause instanceof GraphQLError) return e.toJSON()
    ctx.deps.log.error('graphql: resolver failed', { project: ctx.params.project, path: e.path?.join('.'), error: cause.name })
    internal = true
    return { message: 'Internal error', path: e.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } }
  })
  const data = result.data ?? null
  return { status: data !== null ? 200 : internal ? 500 : 400, body: { data, errors: errors.map(withoutValue) } }
}

/**
 * graphql-js quotes the offending literal in a validation error (`String cannot represent a non
 * string value: {s: "…"}`, `Expected value of type "Int!", found "…"`), and a literal may be a
 * secret the caller meant for a variable: the answer names the type only.
 */
function withoutLiteral(e: GraphQLFormattedError): GraphQLFormattedError {
  const message = e.message
    .replace(/, found [\s\S]*$/, ', found a value of another type (not quoted).')
    .replace(/(cannot represent [^:]*value): [\s\S]*$/, '$1 (not quoted).')
    .replace(/^Value [\s\S]* does not exist in "(\w+)" enum\.?/, 'The value (not quoted) does not exist in "$1" enum.')
  return { ...e, message }
}

/**
 * graphql-js quotes the offending value when a $variable does not coerce (`got invalid value …`), and
 * a variable may hold a secret: the answer names the variable only.
 */
function withoutValue(e: GraphQLFormattedError): GraphQLFormattedError {
  const name = / got invalid value /.test(e.message) ? /^Variable "\$(\w+)"/.exec(e.message)?.[1] : undefined
  return name === undefined
    ? e
    : {
        ...e,
        message: `Variable "$${name}" got an invalid value (a wrong type, or a required field missing)`,
        extensions: { ...e.extensions, code: 'BAD_USER_INPUT' },
      }
}

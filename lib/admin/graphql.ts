// Upstream's GraphQL Actions API at POST /actions/:project, on the reference graphql
// package: the body is bounded, parsed, measured (graphql/bounds.ts), validated, then executed against
// the project of the URL. Answers are GraphQL over HTTP's: 200 with `{ data, errors }`, 400 with
// `{ errors }` for a body that is not a GraphQL request at all.
import { execute, GraphQLError, parse, validate, type ExecutionResult, type GraphQLFormattedError } from 'graphql'
import { z } from 'zod'
import { exceededBound, MAX_QUERY_CHARS, MAX_QUERY_TOKENS } from './graphql/bounds.js'
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
  body: { errors: [{ message, extensions: { code } }] } satisfies GraphqlAnswer,
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
    if (query.length > MAX_QUERY_CHARS) return refused(200, `Query refused: more than ${MAX_QUERY_CHARS} characters`, 'QUERY_TOO_COMPLEX')
    let doc
    try {
      doc = parse(query, { maxTokens: MAX_QUERY_TOKENS })
    } catch (e) {
      if (!(e instanceof GraphQLError)) throw e
      // The message quotes the offending token, and a string token may be a variable's value: its kind only.
      const error = e.toJSON()
      return { status: 200, body: { errors: [{ ...error, message: error.message.replace(/\b(String|BlockString) ".*"/s, '$1') }] } }
    }
    const crossed = exceededBound(doc)
    if (crossed) return refused(200, `Query refused: ${crossed}`, 'QUERY_TOO_COMPLEX')
    const invalid = validate(actionsSchema(), doc, undefined, { maxErrors: MAX_VALIDATION_ERRORS })
    if (invalid.length) return { status: 200, body: { errors: invalid.map(e => e.toJSON()) } }
    const contextValue: GraphqlContext = { deps: ctx.deps, principal: ctx.principal, project }
    const result = await execute({
      schema: actionsSchema(),
      document: doc,
      rootValue,
      contextValue,
      variableValues: variables,
      operationName,
    })
    return { status: 200, body: answer(result, ctx) }
  },
}

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
 * The result as JSON. An error a resolver meant (a GraphQLError of its own) is answered as it is; any
 * other (a driver's, the queue's) may quote a statement or a value, so it is logged by name and
 * answered as an internal error.
 */
function answer(result: ExecutionResult, ctx: RouteContext): GraphqlAnswer {
  if (!result.errors?.length) return { data: result.data }
  const errors = result.errors.map(e => {
    const cause = e.originalError
    if (cause === undefined || cause instanceof GraphQLError) return e.toJSON()
    ctx.deps.log.error('graphql: resolver failed', { project: ctx.params.project, path: e.path?.join('.'), error: cause.name })
    return { message: 'Internal error', path: e.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } }
  })
  return { data: result.data, errors: errors.map(withoutValue) }
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

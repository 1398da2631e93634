import middy from '@middy/core'
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
  LambdaFunctionURLEventWithIAMAuthorizer,
} from 'aws-lambda'
import { adminRoutes } from '../lib/admin/api.js'
import { createRouter } from '../lib/admin/router.js'
import { consoleResponse, isConsolePath } from '../console/serve.js'
import type { AdminRequest, Route } from '../lib/admin/types.js'
import {
  coldStartDeps,
  flushMetricsAfter,
  flushSpansAfter,
  forInvocation,
  renewSecretAfterRefusal,
  renewSecretsAfter,
  type DepsSource,
} from './runtime.js'

/** A Function URL event (payload format 2.0), with the IAM authorizer's context when the URL's AuthType is AWS_IAM. */
export type FunctionUrlEvent = APIGatewayProxyEventV2 | LambdaFunctionURLEventWithIAMAuthorizer

/**
 * The alias behind the second Function URL, the one with AuthType NONE (serverless.yml's
 * AdminBearerAlias has this name; test/deploy/package.test.ts checks that they agree).
 */
export const BEARER_ALIAS = 'bearer'

/** Which way a request came in: `iam` (the function's own URL, AuthType AWS_IAM) or `bearer` (the alias's URL, AuthType NONE). */
export type Door = 'iam' | 'bearer'

/**
 * The door of an invocation, from the ARN Lambda says it invoked: `arn:aws:lambda:region:account:function:name`
 * for the function itself, with a `:qualifier` appended for an alias or version. The IAM URL is the
 * unqualified function's; the NONE URL is the alias's, so its invocations always carry the qualifier.
 * Lambda sets that ARN from the resource it invoked, never from the request, so no header, path or
 * body sent to the public URL can change it. Any qualifier at all counts as the Bearer door: only the
 * unqualified function can be trusted as IAM (fail closed for an alias or version added later).
 */
export function doorOf(context: Pick<Context, 'invokedFunctionArn'>): Door {
  const parts = context.invokedFunctionArn.split(':')
  return parts.length === 7 && parts[5] === 'function' ? 'iam' : 'bearer'
}

/**
 * True when AWS checked the caller's SigV4 signature: the request came through the IAM door, where
 * Lambda rejects every unsigned or unauthorised request before invoking, and carries the caller's
 * identity. Through the NONE door, AWS checks nothing, so an IAM-looking context there is never
 * believed (AWS builds requestContext itself, but the door is decided first and independently).
 */
function iamSigned(event: FunctionUrlEvent, context: Pick<Context, 'invokedFunctionArn'>): boolean {
  if (doorOf(context) !== 'iam') return false
  const request = event.requestContext
  return 'authorizer' in request && typeof request.authorizer === 'object' && request.authorizer !== null && 'iam' in request.authorizer
}

/** The transport-free request of a Function URL event: lower-cased headers, the body decoded when Lambda base64-encoded it. */
export function fromFunctionUrl(event: FunctionUrlEvent): AdminRequest {
  const headers: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(event.headers ?? {})) headers[name.toLowerCase()] = value
  const raw = event.body ?? ''
  return {
    method: event.requestContext.http.method.toUpperCase(),
    path: event.rawPath,
    query: new URLSearchParams(event.rawQueryString ?? ''),
    headers,
    body: event.isBase64Encoded ? Buffer.from(raw, 'base64').toString('utf8') : raw,
  }
}

/** Builds the admin handler over its dependencies and routes; the deployed one uses the cold-start ones and every route. */
export const createHandler = (source: DepsSource, routes: readonly Route[] = adminRoutes()) => {
  // A refused database login renews the secret, as the other functions' failures do through middy.
  const router = createRouter(routes, { onFailure: renewSecretsAfter })
  return (
    middy(async (event: FunctionUrlEvent, context: Context): Promise<APIGatewayProxyStructuredResultV2> => {
      // The console's static files need no database and no caller: its every API call is authorized on its own.
      if (isConsolePath(event.rawPath)) {
        const file = consoleResponse(event.requestContext.http.method.toUpperCase(), event.rawPath)
        return { statusCode: file.status, headers: file.headers, body: file.body }
      }
      const deps = forInvocation(await source(), context)
      const response = await router(deps, fromFunctionUrl(event), { iamSigned: iamSigned(event, context) })
      return { statusCode: response.status, headers: response.headers, body: response.body }
    })
      .use(renewSecretAfterRefusal())
      // An operator or a script waits on this answer: counters go by EMF, the Pushgateway push is not awaited.
      .use(flushMetricsAfter(source, { push: 'background' }))
      .use(flushSpansAfter(source))
  )
}

/**
 * Behind two Function URLs: the function's own (AuthType AWS_IAM: every caller is IAM-signed, so acts
 * as system) and the `bearer` alias's (AuthType NONE: only a valid Bearer token gets in).
 */
export const handler = createHandler(coldStartDeps)

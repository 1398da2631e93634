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
import { coldStartDeps, flushMetricsAfter, forInvocation, renewSecretsAfter, type DepsSource } from './runtime.js'

/** A Function URL event (payload format 2.0), with the IAM authorizer's context when the URL's AuthType is AWS_IAM. */
export type FunctionUrlEvent = APIGatewayProxyEventV2 | LambdaFunctionURLEventWithIAMAuthorizer

/**
 * True when AWS checked the caller's SigV4 signature: with AuthType AWS_IAM, Lambda rejects every
 * unsigned or unauthorised request before invoking and puts the caller's identity here.
 */
function iamSigned(event: FunctionUrlEvent): boolean {
  const context = event.requestContext
  return 'authorizer' in context && typeof context.authorizer === 'object' && context.authorizer !== null && 'iam' in context.authorizer
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
      const response = await router(deps, fromFunctionUrl(event), { iamSigned: iamSigned(event) })
      return { statusCode: response.status, headers: response.headers, body: response.body }
    })
      // An operator or a script waits on this answer: counters go by EMF, the Pushgateway push is not awaited.
      .use(flushMetricsAfter(source, { push: 'background' }))
  )
}

/** Behind a Lambda Function URL with AuthType AWS_IAM: every caller is IAM-signed, so acts as system. */
export const handler = createHandler(coldStartDeps)

// The admin function's transport: Function URL events (payload format 2.0, as Lambda sends
// them with AuthType AWS_IAM) mapped to the router, with real tokens in a real Postgres.
import { describe, expect, it } from 'vitest'
import { BEARER_ALIAS, createHandler, doorOf, fromFunctionUrl, type FunctionUrlEvent } from '../../functions/admin.js'
import { createToken } from '../../lib/db/tokens.js'
import type { Route } from '../../lib/admin/types.js'
import { createContext } from '../helpers/lambda.js'
import { useHarness } from '../helpers/harness.js'

const env = useHarness()

const routes: Route[] = [
  {
    method: 'POST',
    path: '/v1/projects/:project/echo',
    need: 'admin',
    handle: async ctx => ({ status: 200, body: { principal: ctx.principal.kind, body: ctx.body ?? null, q: ctx.query.get('q') } }),
  },
  {
    method: 'GET',
    path: '/v1/projects/:project/fails',
    need: 'view',
    handle: async () => {
      throw new Error('password authentication failed for user "secret-user"')
    },
  },
]

const IAM = {
  iam: {
    accessKey: 'AKIAEXAMPLE',
    accountId: '123456789012',
    callerId: 'AIDAEXAMPLE',
    cognitoIdentity: null,
    principalOrgId: 'o-example',
    userArn: 'arn:aws:iam::123456789012:user/operator',
    userId: 'AIDAEXAMPLE',
  },
}

/** A Function URL event as Lambda builds one; `iam` adds the authorizer context an AWS_IAM URL carries. */
function urlEvent(
  method: string,
  rawPath: string,
  opts: { headers?: Record<string, string>; body?: string; base64?: boolean; query?: string; iam?: boolean } = {},
): FunctionUrlEvent {
  const http = { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' }
  const requestContext = {
    accountId: '123456789012',
    apiId: 'abcdefghij',
    domainName: 'abcdefghij.lambda-url.eu-central-1.on.aws',
    domainPrefix: 'abcdefghij',
    http,
    requestId: 'req-1',
    routeKey: '$default',
    stage: '$default',
    time: '01/Dec/2026:23:00:00 +0000',
    timeEpoch: 1_796_166_000_000,
  }
  const body = opts.body === undefined ? {} : { body: opts.base64 ? Buffer.from(opts.body).toString('base64') : opts.body }
  const common = {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString: opts.query ?? '',
    headers: { host: requestContext.domainName, ...opts.headers },
    isBase64Encoded: opts.base64 ?? false,
    ...body,
  }
  return opts.iam ? { ...common, requestContext: { ...requestContext, authorizer: IAM } } : { ...common, requestContext }
}

describe('the admin function', () => {
  it('acts as system for an IAM-signed request, on any project', async () => {
    const handler = createHandler(() => env.deps, routes)
    const res = await handler(urlEvent('POST', '/v1/projects/anything/echo', { iam: true, body: '{"a":1}', query: 'q=2' }), createContext())
    expect(res).toMatchObject({ statusCode: 200, headers: { 'content-type': 'application/json' } })
    expect(JSON.parse(res.body ?? '')).toEqual({ principal: 'system', body: { a: 1 }, q: '2' })
  })

  it('needs a Bearer token for a request without IAM context, and holds the token to its project and role', async () => {
    const handler = createHandler(() => env.deps, routes)
    const admin = await createToken(env.deps.db, { project: 'L', role: 'admin' })
    const viewer = await createToken(env.deps.db, { project: 'L', role: 'viewer' })
    const call = (path: string, token?: string) =>
      handler(urlEvent('POST', path, token ? { headers: { Authorization: `Bearer ${token}` } } : {}), createContext())
    const unsigned = await call('/v1/projects/L/echo')
    expect(unsigned).toMatchObject({ statusCode: 401, headers: { 'content-type': 'application/problem+json' } })
    expect((await call('/v1/projects/L/echo', admin.token)).statusCode).toBe(200)
    expect((await call('/v1/projects/M/echo', admin.token)).statusCode).toBe(403)
    expect((await call('/v1/projects/L/echo', viewer.token)).statusCode).toBe(403)
  })

  it('decodes a base64 body, and answers a 500 problem that quotes nothing of the failure', async () => {
    const handler = createHandler(() => env.deps, routes)
    const logs = env.captureLogs()
    try {
      const res = await handler(urlEvent('POST', '/v1/projects/x/echo', { iam: true, body: '{"é":"ü"}', base64: true }), createContext())
      expect(JSON.parse(res.body ?? '').body).toEqual({ é: 'ü' })
      const failed = await handler(urlEvent('GET', '/v1/projects/x/fails', { iam: true }), createContext())
      expect(failed.statusCode).toBe(500)
      expect(failed.body).not.toContain('secret-user')
      expect(logs.lines.join('\n')).not.toContain('secret-user')
      expect(logs.records()).toContainEqual(expect.objectContaining({ msg: 'admin route failed', errorName: 'Error' }))
    } finally {
      logs.restore()
    }
  })

  it('never takes a request through the bearer alias (the AuthType NONE URL) for system, whatever IAM context it carries', async () => {
    const handler = createHandler(() => env.deps, routes)
    const iamDoor = createContext()
    // Lambda invokes the alias's ARN for its URL: the qualifier is in the ARN, set by Lambda, not by the request.
    const bearerDoor = { ...createContext(), invokedFunctionArn: `${iamDoor.invokedFunctionArn}:${BEARER_ALIAS}` }
    expect([doorOf(iamDoor), doorOf(bearerDoor)]).toEqual(['iam', 'bearer'])
    // Any other qualifier (a version, $LATEST, another alias) is not the IAM door either: fail closed.
    for (const q of ['$LATEST', '7', 'live']) expect(doorOf({ invokedFunctionArn: `${iamDoor.invokedFunctionArn}:${q}` })).toBe('bearer')

    const forged = (token?: string) =>
      urlEvent('POST', '/v1/projects/N/echo', {
        iam: true,
        headers: { 'x-amz-security-token': 'x', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      })
    const refused = await handler(forged(), bearerDoor)
    expect(refused).toMatchObject({ statusCode: 401, headers: { 'www-authenticate': 'Bearer realm="actions"' } })
    // A token gets in as itself: held to its project and role, not lifted to system.
    const viewer = await createToken(env.deps.db, { project: 'N', role: 'viewer' })
    const admin = await createToken(env.deps.db, { project: 'N', role: 'admin' })
    expect((await handler(forged(viewer.token), bearerDoor)).statusCode).toBe(403)
    const asToken = await handler(forged(admin.token), bearerDoor)
    expect(asToken.statusCode).toBe(200)
    expect(JSON.parse(asToken.body ?? '').principal).toBe('token')
    // The same event through the IAM door stays system, token or not.
    const signed = await handler(forged(), iamDoor)
    expect(signed.statusCode).toBe(200)
    expect(JSON.parse(signed.body ?? '').principal).toBe('system')
  })

  it('maps a Function URL event to the transport-free request: method, path, query, lower-cased headers', () => {
    const request = fromFunctionUrl(urlEvent('put', '/v1/a%20b', { headers: { 'X-Thing': 'v' }, query: 'a=1&a=2' }))
    expect(request.method).toBe('PUT')
    expect(request.path).toBe('/v1/a%20b')
    expect(request.query.getAll('a')).toEqual(['1', '2'])
    expect(request.headers['x-thing']).toBe('v')
    expect(request.body).toBe('')
  })
})

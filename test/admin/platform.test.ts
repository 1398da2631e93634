// The admin API's platform over real HTTP: the local stack serves the router under /v1/
// and /actions/ on its one port. Routes defined here stand in for REST and GraphQL, so every answer
// the router itself gives (401, 403, 404, 405, 413, 400, 500) is checked, with real tokens in a real
// Postgres, and no log line holds a token, a header or a body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createToken, revokeToken } from '../../lib/db/tokens.js'
import { ProblemError, type Route } from '../../lib/admin/types.js'
import { MAX_ADMIN_BODY_BYTES } from '../../lib/admin/router.js'
import { startLocalStack } from '../../local/stack.js'
import { useDatabase } from '../helpers/harness.js'
import { useLocalStack } from '../helpers/stack.js'

const SECRET = 'CANARY-SECRET-in-a-cause'

/** Stand-in routes: each answers with what the router handed it. */
const routes: Route[] = [
  { method: 'GET', path: '/v1/whoami', need: 'view', handle: async ctx => ({ status: 200, body: { principal: ctx.principal } }) },
  {
    method: 'GET',
    path: '/v1/projects/:project/things',
    need: 'view',
    handle: async ctx => ({ status: 200, body: { principal: ctx.principal, params: ctx.params, limit: ctx.query.get('limit') } }),
  },
  {
    method: 'POST',
    path: '/v1/projects/:project/things',
    need: 'admin',
    handle: async ctx => ({ status: 201, body: { got: ctx.body ?? null } }),
  },
  { method: 'PUT', path: '/v1/projects/:project/variables', need: 'variables', handle: async () => ({ status: 200, body: { ok: true } }) },
  { method: 'DELETE', path: '/v1/projects/:project/things/:id', need: 'admin', handle: async () => ({ status: 204 }) },
  {
    method: 'GET',
    path: '/v1/projects/:project/things/:id',
    need: 'view',
    handle: async ctx => ({ status: 200, body: { id: ctx.params['id'] } }),
  },
  {
    method: 'GET',
    path: '/v1/projects/:project/things/special',
    need: 'view',
    handle: async () => ({ status: 200, body: { special: true } }),
  },
  {
    method: 'POST',
    path: '/v1/projects/:project/strict',
    need: 'view',
    handle: async ctx => {
      const parsed = z.object({ limit: z.number().int().max(1000), state: z.enum(['failed', 'created']) }).parse(ctx.body)
      return { status: 200, body: parsed }
    },
  },
  {
    method: 'POST',
    path: '/v1/projects/:project/boom',
    need: 'view',
    handle: async () => {
      throw new TypeError(`database said ${SECRET}`, { cause: new Error(SECRET) })
    },
  },
  {
    method: 'POST',
    path: '/v1/projects/:project/conflict',
    need: 'view',
    handle: async () => {
      throw new ProblemError(409, 'Conflict', 'The event is not failed.')
    },
  },
  {
    method: 'POST',
    path: '/actions/:project',
    need: 'view',
    handle: async ctx => ({ status: 200, body: { data: { project: ctx.params['project'] } } }),
  },
]

const db = useDatabase()
const local = useLocalStack(db, { adminRoutes: routes })
const tokens = { viewerA: '', deployerA: '', adminA: '', adminB: '' }

beforeAll(async () => {
  tokens.viewerA = (await createToken(db.pool, { project: 'A', role: 'viewer' })).token
  tokens.deployerA = (await createToken(db.pool, { project: 'A', role: 'deployer' })).token
  tokens.adminA = (await createToken(db.pool, { project: 'A', role: 'admin' })).token
  tokens.adminB = (await createToken(db.pool, { project: 'B', role: 'admin' })).token
})
afterAll(() => {
  // Whatever a test did, no line the stack logged carries a token, the canary or a header.
  const all = local.logs.lines.join('\n')
  for (const secret of [...Object.values(tokens), local.stack.adminToken, SECRET]) expect(all).not.toContain(secret)
  expect(all.toLowerCase()).not.toContain('bearer')
})

type Answer = { status: number; type: string | null; headers: Headers; json: Record<string, unknown> | undefined }

async function call(
  method: string,
  path: string,
  opts: { token?: string; authorization?: string; body?: string | Uint8Array } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`
  if (opts.authorization !== undefined) headers['authorization'] = opts.authorization
  const res = await fetch(local.stack.url + path, {
    method,
    headers,
    ...(opts.body === undefined ? {} : { body: opts.body }),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    headers: res.headers,
    json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
  }
}

/** Checks an answer is an RFC 9457 problem of `status`, and returns its detail. */
function expectProblem(answer: Answer, status: number): string {
  expect(answer.status).toBe(status)
  expect(answer.type).toBe('application/problem+json')
  expect(answer.json).toMatchObject({ type: 'about:blank', status, title: expect.any(String) })
  return String(answer.json?.['detail'] ?? '')
}

describe('authentication', () => {
  it('answers 401 without a token, with a token it does not know and with a credential that is not Bearer', async () => {
    for (const opts of [
      {},
      { token: 'actions_' + 'x'.repeat(43) },
      { token: 'nonsense' },
      { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      { authorization: 'Bearer' },
    ]) {
      const answer = await call('GET', '/v1/projects/A/things', opts)
      expectProblem(answer, 401)
      expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer /)
    }
    expectProblem(await call('GET', '/v1/projects/A/things', { authorization: `Bearer ${'y'.repeat(5000)}` }), 401)
  })

  it('reads the Bearer scheme case-insensitively', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      expect((await call('GET', '/v1/projects/A/things', { authorization: `${scheme} ${tokens.viewerA}` })).status).toBe(200)
    }
  })

  it('answers 401 to a revoked token at once, on the very next request', async () => {
    const created = await createToken(db.pool, { project: 'A', role: 'admin', name: 'short-lived' })
    expect((await call('GET', '/v1/projects/A/things', { token: created.token })).status).toBe(200)
    expect(await revokeToken(db.pool, created.id)).toBe(true)
    expectProblem(await call('GET', '/v1/projects/A/things', { token: created.token }), 401)
    expectProblem(await call('POST', '/v1/projects/A/things', { token: created.token, body: '{}' }), 401)
  })

  it('gives the handler the token principal it found', async () => {
    const answer = await call('GET', '/v1/projects/A/things?limit=5', { token: tokens.viewerA })
    expect(answer.status).toBe(200)
    expect(answer.type).toBe('application/json')
    expect(answer.json).toMatchObject({ principal: { kind: 'token', project: 'A', role: 'viewer' }, params: { project: 'A' }, limit: '5' })
  })

  it('takes the bootstrap token it printed at start as system, on every project', async () => {
    expect(local.stack.adminToken).toMatch(/^actions_local_[A-Za-z0-9_-]{43}$/)
    expect(local.printed.some(l => l.includes('/v1/') && l.includes('/actions/') && l.includes(local.stack.adminToken))).toBe(true)
    for (const project of ['A', 'B', 'never-seen']) {
      expect(await call('GET', `/v1/projects/${project}/things`, { token: local.stack.adminToken })).toMatchObject({
        status: 200,
        json: { principal: { kind: 'system' } },
      })
      expect((await call('POST', `/v1/projects/${project}/things`, { token: local.stack.adminToken, body: '{"a":1}' })).status).toBe(201)
      expect((await call('PUT', `/v1/projects/${project}/variables`, { token: local.stack.adminToken, body: '{}' })).status).toBe(200)
    }
    expect(await call('GET', '/v1/whoami', { token: local.stack.adminToken })).toMatchObject({
      status: 200,
      json: { principal: { kind: 'system' } },
    })
    expect(await call('POST', '/actions/B', { token: local.stack.adminToken, body: '{"query":"{ variables }"}' })).toMatchObject({
      status: 200,
      json: { data: { project: 'B' } },
    })
  })
})

describe('authorization', () => {
  it('answers 403 to a token of another project, whatever its role', async () => {
    for (const token of [tokens.viewerA, tokens.adminA]) {
      expectProblem(await call('GET', '/v1/projects/B/things', { token }), 403)
      expectProblem(await call('POST', '/actions/B', { token, body: '{}' }), 403)
    }
    expect((await call('GET', '/v1/projects/B/things', { token: tokens.adminB })).status).toBe(200)
  })

  it('lets a viewer view and nothing more, a deployer view and set variables, an admin do all', async () => {
    const can = async (token: string) => [
      (await call('GET', '/v1/projects/A/things', { token })).status,
      (await call('PUT', '/v1/projects/A/variables', { token, body: '{}' })).status,
      (await call('POST', '/v1/projects/A/things', { token, body: '{}' })).status,
      (await call('DELETE', '/v1/projects/A/things/1', { token })).status,
    ]
    expect(await can(tokens.viewerA)).toEqual([200, 403, 403, 403])
    expect(await can(tokens.deployerA)).toEqual([200, 200, 403, 403])
    expect(await can(tokens.adminA)).toEqual([200, 200, 201, 204])
    expectProblem(await call('POST', '/v1/projects/A/things', { token: tokens.viewerA, body: '{}' }), 403)
  })

  it('lets any valid token use a route that names no project', async () => {
    expect(await call('GET', '/v1/whoami', { token: tokens.viewerA })).toMatchObject({
      status: 200,
      json: { principal: { kind: 'token', project: 'A' } },
    })
    expectProblem(await call('GET', '/v1/whoami'), 401)
  })
})

describe('problems', () => {
  it('answers 404 for a path no route has and 405 with Allow for a method a path does not take', async () => {
    expectProblem(await call('GET', '/v1/nowhere', { token: tokens.adminA }), 404)
    expectProblem(await call('GET', '/actions', { token: tokens.adminA }), 404)
    expectProblem(await call('GET', '/v1/projects//things', { token: tokens.adminA }), 404)
    const wrong = await call('PATCH', '/v1/projects/A/things', { token: tokens.adminA, body: '{}' })
    expectProblem(wrong, 405)
    expect(wrong.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'POST'])
    // The enqueue endpoint and the rest of the stack still answer beside the admin API.
    expect((await call('GET', '/healthz')).status).toBe(200)
  })

  it('prefers a literal segment to a parameter whatever the order of the routes, and decodes parameters', async () => {
    expect(await call('GET', '/v1/projects/A/things/special', { token: tokens.viewerA })).toMatchObject({
      status: 200,
      json: { special: true },
    })
    expect(await call('GET', '/v1/projects/A/things/a%2Fb%20c', { token: tokens.viewerA })).toMatchObject({
      status: 200,
      json: { id: 'a/b c' },
    })
  })

  it('answers 413 to a body over the bound, and 400 to a body that is not JSON or is nested too deep', async () => {
    expectProblem(
      await call('POST', '/v1/projects/A/things', { token: tokens.adminA, body: new Uint8Array(MAX_ADMIN_BODY_BYTES + 1).fill(32) }),
      413,
    )
    const notJson = expectProblem(await call('POST', '/v1/projects/A/things', { token: tokens.adminA, body: `{"url": "${SECRET}"` }), 400)
    expect(notJson).not.toContain(SECRET)
    expectProblem(await call('POST', '/v1/projects/A/things', { token: tokens.adminA, body: '['.repeat(100) + ']'.repeat(100) }), 400)
    expect(await call('POST', '/v1/projects/A/things', { token: tokens.adminA, body: '{"a":[1,2]}' })).toMatchObject({
      status: 201,
      json: { got: { a: [1, 2] } },
    })
    expect(await call('POST', '/v1/projects/A/things', { token: tokens.adminA })).toMatchObject({ status: 201, json: { got: null } })
  })

  it('answers 400 to a malformed path and to a NUL in a path parameter', async () => {
    expectProblem(await call('GET', '/v1/projects/%E0%A4%A/things', { token: local.stack.adminToken }), 400)
    expectProblem(await call('GET', '/v1/projects/a%00b/things', { token: local.stack.adminToken }), 400)
  })

  it('turns a validation error into a 400 listing paths and messages, never the values', async () => {
    const detail = expectProblem(
      await call('POST', '/v1/projects/A/strict', { token: tokens.viewerA, body: JSON.stringify({ limit: 5000, state: SECRET }) }),
      400,
    )
    expect(detail).toContain('limit')
    expect(detail).toContain('state')
    expect(detail).not.toContain(SECRET)
  })

  it('answers a ProblemError as the problem it names', async () => {
    const answer = await call('POST', '/v1/projects/A/conflict', { token: tokens.viewerA })
    expect(expectProblem(answer, 409)).toBe('The event is not failed.')
    expect(answer.json?.['title']).toBe('Conflict')
  })

  it('answers an unexpected failure with a 500 that quotes nothing of the cause, logged by name only', async () => {
    local.logs.lines.length = 0
    const answer = await call('POST', '/v1/projects/A/boom', { token: tokens.viewerA, body: '{}' })
    expectProblem(answer, 500)
    expect(JSON.stringify(answer.json)).not.toContain(SECRET)
    expect(JSON.stringify(answer.json)).not.toContain('TypeError')
    const failed = local.logs.records().filter(r => r.level === 'error')
    expect(failed).toMatchObject([
      { msg: 'admin route failed', errorName: 'TypeError', route: '/v1/projects/:project/boom', method: 'POST' },
    ])
    expect(local.logs.lines.join('\n')).not.toContain(SECRET)
  })
})

describe('the bootstrap token from the environment', () => {
  it('uses ACTIONS_ADMIN_TOKEN as the system token, names it and never prints it', async () => {
    const chosen = 'my-local-admin-token-0123456789'
    const lines: string[] = []
    const other = await startLocalStack({
      env: { DATABASE_URL: db.url, LOG_LEVEL: 'error', ACTIONS_ADMIN_TOKEN: chosen },
      port: 0,
      sweepIntervalMs: 3_600_000,
      print: l => lines.push(l),
      adminRoutes: routes,
    })
    try {
      expect(other.adminToken).toBe(chosen)
      expect(lines.join('\n')).toContain('ACTIONS_ADMIN_TOKEN')
      expect(lines.join('\n')).not.toContain(chosen)
      const res = await fetch(`${other.url}/v1/projects/Z/things`, { headers: { authorization: `Bearer ${chosen}` } })
      expect(await res.json()).toMatchObject({ principal: { kind: 'system' } })
      expect(
        (await fetch(`${other.url}/v1/projects/Z/things`, { headers: { authorization: `Bearer ${local.stack.adminToken}` } })).status,
      ).toBe(401)
    } finally {
      await other.stop()
    }
  })

  it('refuses to start with an ACTIONS_ADMIN_TOKEN that could not be sent as a Bearer token', async () => {
    await expect(
      startLocalStack({
        env: { DATABASE_URL: db.url, LOG_LEVEL: 'error', ACTIONS_ADMIN_TOKEN: 'short' },
        port: 0,
        sweepIntervalMs: 3_600_000,
        adminRoutes: routes,
      }),
    ).rejects.toThrow(/ACTIONS_ADMIN_TOKEN/)
  })
})

// A deployer may set variables, and a variable may be a target's host: it pointed HOOK_BASE at a host
// of its own and received the next delivery with {{API_KEY}} filled in and the schema's literal
// headers. Now a non-admin moves a target's host only within the target's allowedHosts (set by the
// admin in the schema, which a deployer cannot write), and a target with allowedHosts is delivered
// only to them, whoever set its variables.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { adminRoutes } from '../../lib/admin/api.js'
import { createRouter } from '../../lib/admin/router.js'
import { createToken } from '../../lib/db/tokens.js'
import { hostAllowed } from '../../lib/delivery/hosts.js'
import { MAX_ALLOWED_HOSTS } from '../../lib/schema/limits.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true, project: 'hosts' })
const dispatch = createHandler(() => env.deps)
const router = createRouter(adminRoutes())
const SECRET = 'api-key-canary-0f3e77'
const LITERAL = 'literal-canary-b29d41'

// Another host on the loopback network: what a deployer would point the target at.
const elsewhere: { url: string; got: IncomingHttpHeaders[] } = { url: '', got: [] }
const server = createServer((req, res) => {
  elsewhere.got.push(req.headers)
  req.resume()
  res.end()
})
beforeAll(async () => {
  await new Promise<void>(resolve => server.listen(0, '127.0.0.2', resolve))
  elsewhere.url = `http://127.0.0.2:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>(resolve => server.close(() => resolve())))

const tokens = { admin: '', deployer: '' }
beforeEach(async () => {
  elsewhere.got.length = 0
  tokens.admin = (await createToken(env.db.pool, { project: env.project, role: 'admin' })).token
  tokens.deployer = (await createToken(env.db.pool, { project: env.project, role: 'deployer' })).token
})

async function call(token: string, method: string, path: string, body?: unknown) {
  const res = await router(env.deps, {
    method,
    path: `/v1/projects/${env.project}${path}`,
    query: new URLSearchParams(),
    headers: { authorization: `Bearer ${token}` },
    body: body === undefined ? '' : JSON.stringify(body),
  })
  return { status: res.status, text: res.body }
}

const setHookBase = (token: string, url: string) => call(token, 'PATCH', '/variables', { variables: { HOOK_BASE: url } })

async function deliverOne(): Promise<{ state: string; error: string | undefined }> {
  const [id = ''] = await enqueueMany(env.deps, env.project, 'to_t', 1)
  await dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
  const { rows } = await env.deps.db.query<{ state: string; log: Array<{ errorMessage?: string }> }>(
    'SELECT state, log FROM actions_event WHERE id = $1',
    [id],
  )
  return { state: rows[0]?.state ?? '', error: rows[0]?.log.at(-1)?.errorMessage }
}

async function setUp(allowedHosts?: string[]) {
  await schemaFor(env.deps, env.project, {
    t: {
      url: '{{HOOK_BASE}}/hook',
      maxAttempts: 1,
      headers: { 'x-api-key': '{{API_KEY}}', 'x-literal': LITERAL },
      ...(allowedHosts ? { allowedHosts } : {}),
    },
  })
  expect((await call(tokens.admin, 'PUT', '/variables', { variables: { HOOK_BASE: env.rx.url, API_KEY: SECRET } })).status).toBe(200)
}

describe('a deployer moving a target', () => {
  it('is refused when the target lists no allowedHosts, and the next delivery goes where the admin said', async () => {
    await setUp()
    const moved = await setHookBase(tokens.deployer, elsewhere.url)
    expect(moved.status).toBe(400)
    expect(moved.text).toContain('targets.t')
    expect(moved.text).not.toContain('127.0.0.2')
    expect(await deliverOne()).toMatchObject({ state: 'succeed' })
    expect(elsewhere.got).toHaveLength(0)
    expect(env.rx.requests[0]?.headers['x-api-key']).toBe(SECRET)
    // A change that keeps the host (a path, a port of the same host) is the deployer's to make.
    expect((await setHookBase(tokens.deployer, `${env.rx.url}/v2`)).status).toBe(200)
  })

  it('is taken within allowedHosts, as upstream’s per-environment variable scripts need, and refused outside them', async () => {
    await setUp(['127.0.0.1', '127.0.0.2'])
    expect((await setHookBase(tokens.deployer, elsewhere.url)).status).toBe(200)
    expect(await deliverOne()).toMatchObject({ state: 'succeed' })
    expect(elsewhere.got).toHaveLength(1)
    expect((await setHookBase(tokens.deployer, 'https://hooks.attacker.example')).status).toBe(400)
    const viaGraphql = await router(env.deps, {
      method: 'POST',
      path: `/actions/${env.project}`,
      query: new URLSearchParams(),
      headers: { authorization: `Bearer ${tokens.deployer}` },
      body: JSON.stringify({
        query: 'mutation { setVariables(args: { variables: [{ name: "HOOK_BASE", value: "https://hooks.attacker.example" }] }) { ok } }',
      }),
    })
    expect(viaGraphql.body).toContain('BAD_USER_INPUT')
    expect(viaGraphql.body).toContain('allowedHosts')
  })
})

describe('a target with allowedHosts', () => {
  it('is never delivered outside them, even when an admin set the variable: the attempt fails as misconfigured', async () => {
    await setUp(['127.0.0.1'])
    expect((await setHookBase(tokens.admin, elsewhere.url)).status).toBe(200)
    expect(await deliverOne()).toEqual({ state: 'failed', error: 'URL host not in allowedHosts' })
    expect(elsewhere.got).toHaveLength(0)
  })

  it('is refused at schema set past MAX_ALLOWED_HOSTS or with an entry that is no host', async () => {
    const put = (allowedHosts: string[]) =>
      call(tokens.admin, 'PUT', '/schema', {
        targets: { t: { type: 'webhook', name: 't', url: '{{HOOK_BASE}}', allowedHosts } },
        triggers: {},
      })
    expect((await put(Array.from({ length: MAX_ALLOWED_HOSTS }, (_, i) => `h${i}.example`))).status).toBe(200)
    expect((await put(Array.from({ length: MAX_ALLOWED_HOSTS + 1 }, (_, i) => `h${i}.example`))).status).toBe(400)
    for (const bad of ['https://x.example', 'x.example:443', '*', 'a..b', `${'a'.repeat(254)}`])
      expect((await put([bad])).status, bad).toBe(400)
    // A deployer cannot write the schema that holds the list.
    expect((await call(tokens.deployer, 'PUT', '/schema', { targets: {}, triggers: {} })).status).toBe(403)
  })
})

describe('hostAllowed', () => {
  it('matches exact names case-insensitively and *.domain below the domain only', () => {
    expect(hostAllowed('Hooks.Example.com', ['hooks.example.com'])).toBe(true)
    expect(hostAllowed('a.example.com', ['*.example.com'])).toBe(true)
    expect(hostAllowed('a.b.example.com', ['*.example.com'])).toBe(true)
    expect(hostAllowed('example.com', ['*.example.com'])).toBe(false)
    expect(hostAllowed('evilexample.com', ['*.example.com'])).toBe(false)
    expect(hostAllowed('example.com.evil', ['example.com'])).toBe(false)
    expect(hostAllowed('127.0.0.1', [])).toBe(false)
  })
})

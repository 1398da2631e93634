// The GraphQL Actions API over real HTTP, behind the real router and real tokens: the local stack
// serves POST /actions/:project as upstream's GraphQlClient calls it (Bearer token, JSON body).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import { createToken, revokeToken } from '../../lib/db/tokens.js'
import { useDatabase } from '../helpers/harness.js'
import { useLocalStack } from '../helpers/stack.js'

const CANARY = 'canary-over-http-93c1d7e2'
const db = useDatabase()
const local = useLocalStack(db, { adminRoutes: [graphqlRoute] })
const tokens = { viewer: '', deployer: '', admin: '', otherAdmin: '' }

beforeAll(async () => {
  tokens.viewer = (await createToken(db.pool, { project: 'A', role: 'viewer' })).token
  tokens.deployer = (await createToken(db.pool, { project: 'A', role: 'deployer' })).token
  tokens.admin = (await createToken(db.pool, { project: 'A', role: 'admin' })).token
  tokens.otherAdmin = (await createToken(db.pool, { project: 'B', role: 'admin' })).token
})
afterAll(() => {
  const all = local.logs.lines.join('\n')
  for (const secret of [...Object.values(tokens), local.stack.adminToken, CANARY]) expect(all).not.toContain(secret)
})

type Answer = {
  status: number
  type: string | null
  text: string
  json: { data?: Record<string, unknown> | null; errors?: Array<{ extensions?: { code?: string } }> }
}

/** POSTs `{ query, variables }` with a Bearer token, as @contember/graphql-client does. */
async function post(project: string, token: string, query: string, variables?: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${local.stack.url}/actions/${project}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  return { status: res.status, type: res.headers.get('content-type'), text, json: JSON.parse(text) }
}

const SET =
  'mutation($variables: [VariableInput!]!, $mode: SetVariablesMode) { setVariables(args: { variables: $variables, mode: $mode }) { ok } }'
const LIST = 'query { variables { name value } }'

describe('POST /actions/:project over HTTP', () => {
  it('serves each role its operations, values only to the admin and the bootstrap token', async () => {
    const set = await post('A', tokens.deployer, SET, { variables: [{ name: 'KEY', value: CANARY }], mode: 'SET' })
    expect(set).toMatchObject({ status: 200, type: 'application/json', json: { data: { setVariables: { ok: true } } } })
    const failed = await post(
      'A',
      tokens.viewer,
      'query($offset: Int, $limit: Int) { failedEvents(args: { offset: $offset, limit: $limit }) { id } }',
      { limit: 100 },
    )
    expect(failed.json).toEqual({ data: { failedEvents: [] } })
    const viewerVars = await post('A', tokens.viewer, LIST)
    // Upstream's engine answers a refused operation 400 with no data; its client then throws "bad request".
    expect(viewerVars.status).toBe(400)
    expect(viewerVars.json.data).toBeNull()
    expect(viewerVars.json.errors?.[0]?.extensions?.code).toBe('FORBIDDEN')
    const deployerVars = await post('A', tokens.deployer, LIST)
    expect(deployerVars.json).toEqual({ data: { variables: [{ name: 'KEY', value: '[redacted]' }] } })
    for (const answer of [set, failed, viewerVars, deployerVars]) expect(answer.text).not.toContain(CANARY)
    expect((await post('A', tokens.admin, LIST)).json).toEqual({ data: { variables: [{ name: 'KEY', value: CANARY }] } })
    expect((await post('A', local.stack.adminToken, LIST)).json).toEqual({ data: { variables: [{ name: 'KEY', value: CANARY }] } })
    expect((await post('A', tokens.admin, 'mutation { processBatch { ok } }')).json).toEqual({ data: { processBatch: { ok: true } } })
  })

  it('answers a token of another project 403 and a revoked one 401, as problems', async () => {
    const other = await post('A', tokens.otherAdmin, LIST)
    expect(other).toMatchObject({ status: 403, type: 'application/problem+json' })
    const doomed = await createToken(db.pool, { project: 'A', role: 'admin' })
    expect((await post('A', doomed.token, LIST)).status).toBe(200)
    await revokeToken(db.pool, doomed.id)
    expect((await post('A', doomed.token, LIST)).status).toBe(401)
  })

  it('answers a body that is not a GraphQL request 400', async () => {
    const res = await post('A', tokens.viewer, '')
    expect(res.status).toBe(400) // an empty document is a GraphQL request with a syntax error, 400 as upstream answers it
    expect(res.json).toMatchObject({ data: null, errors: [{ extensions: { code: 'GRAPHQL_PARSE_FAILED' } }] })
    const bad = await fetch(`${local.stack.url}/actions/A`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.viewer}` },
      body: JSON.stringify({ operationName: 'x' }),
      signal: AbortSignal.timeout(20_000),
    })
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] })
  })
})

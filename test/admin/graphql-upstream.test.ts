// Upstream's client relies on parts of upstream's GraphQL contract beyond the schema: an event id of
// 32 hex digits without dashes (upstream's UUID scalar takes it), HTTP 400 with `{ data: null,
// errors: [{ message, extensions: { code } }] }` for what it refuses, and validation errors that do
// not repeat the caller's literal values.
import { describe, expect, it } from 'vitest'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import type { Principal, Role } from '../../lib/admin/types.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'

const env = useHarness({ project: 'up' })
const SECRET = 'SECRET-literal-5e81c0'

type Answer = { data?: Record<string, unknown> | null; errors?: Array<{ message: string; extensions?: { code?: string } }> }

async function gql(role: Role | 'system', query: string) {
  const principal: Principal = role === 'system' ? { kind: 'system' } : { kind: 'token', tokenId: 't', project: env.project, role }
  const res = await graphqlRoute.handle({
    deps: env.deps,
    principal,
    params: { project: env.project },
    query: new URLSearchParams(),
    body: { query },
  })
  return { status: res.status, text: JSON.stringify(res.body), ...(res.body as Answer) }
}

describe('ids', () => {
  it('finds, retries and stops an event by its 32 hex digits without dashes, as by its usual form', async () => {
    await schemaFor(env.deps, env.project, { t: { url: 'http://127.0.0.1:9' } })
    const [id = '', other = ''] = await enqueueMany(env.deps, env.project, 'to_t', 2)
    const bare = id.replaceAll('-', '').toUpperCase()
    expect(bare).toMatch(/^[0-9A-F]{32}$/)
    expect((await gql('viewer', `{ event(id: "${bare}") { id } }`)).data).toEqual({ event: { id } })
    await env.deps.db.query(`UPDATE actions_event SET state = 'failed' WHERE id = $1`, [id])
    expect((await gql('admin', `mutation { retryEvent(id: "${bare}") { ok } }`)).data).toEqual({ retryEvent: { ok: true } })
    expect((await gql('admin', `mutation { stopEvent(id: "${other.replaceAll('-', '')}") { ok } }`)).data).toEqual({
      stopEvent: { ok: true },
    })
    // 31 or 33 digits, or other letters, are no id.
    for (const wrong of [bare.slice(1), `${bare}0`, `${bare.slice(1)}g`]) {
      const res = await gql('viewer', `{ event(id: "${wrong}") { id } }`)
      expect(res.errors?.[0]?.extensions?.code, wrong).toBe('BAD_USER_INPUT')
    }
  })
})

describe('refusals', () => {
  it('answers a syntax error, a validation error and a forbidden operation 400 with data null and a code', async () => {
    for (const [query, code, role] of [
      ['{ failedEvents { id }', 'GRAPHQL_PARSE_FAILED', 'viewer'],
      ['{ failedEvents { nope } }', 'GRAPHQL_VALIDATION_FAILED', 'viewer'],
      ['{ failedEvents { id } }', 'FORBIDDEN', 'deployer'],
      ['mutation { processBatch { ok } }', 'FORBIDDEN', 'viewer'],
    ] as const) {
      const res = await gql(role, query)
      expect(res.status, query).toBe(400)
      expect(res.data, query).toBeNull()
      expect(res.errors?.[0], query).toMatchObject({ message: expect.any(String), extensions: { code } })
    }
  })

  it('never repeats a literal value in a validation error', async () => {
    for (const query of [
      `mutation { setVariables(args: { variables: [{ name: "A", value: { s: "${SECRET}" } }] }) { ok } }`,
      `{ failedEvents(args: { limit: "${SECRET}" }) { id } }`,
      `{ failedEvents(args: { limit: ${'9'.repeat(30)} }) { id } }`,
      `mutation { setVariables(args: { variables: [], mode: ${SECRET.replaceAll('-', '_')} }) { ok } }`,
    ]) {
      const res = await gql('admin', query)
      expect(res.status, query).toBe(400)
      expect(res.errors?.[0]?.extensions?.code, query).toBe('GRAPHQL_VALIDATION_FAILED')
      expect(res.text, query).not.toContain(SECRET)
      expect(res.text, query).not.toContain(SECRET.replaceAll('-', '_'))
      expect(res.text, query).not.toContain('9'.repeat(30))
    }
  })
})

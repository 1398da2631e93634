// The admin API as deployed routes it: lib/admin/api.ts's routes, served by the local
// stack's HTTP server on its one port, with real tokens, a real receiver and the stack's SQS emulator.
// The first done-when, end to end: a viewer of A reads A's failed events and nothing else,
// an admin of A retries one and its signal wakes dispatch, a revoked token gets 401 at once.
import { describe, expect, it } from 'vitest'
import { createToken, revokeToken } from '../../lib/db/tokens.js'
import { useDatabase, useReceiver } from '../helpers/harness.js'
import { useLocalStack } from '../helpers/stack.js'
import { until } from '../helpers/wait.js'
import { createPayload, TX } from '../fixtures/schemas.js'

const db = useDatabase()
const rx = useReceiver()
// The breaker off: the receiver's first 500 must not pause the target, so the retry is delivered at once.
const local = useLocalStack(db, { env: { LOG_LEVEL: 'error', BREAKER_FAILURES: '0' } })

type Answer = { status: number; type: string | null; json: Record<string, unknown> }

async function call(method: string, path: string, token: string | undefined, body?: unknown): Promise<Answer> {
  const res = await fetch(local.stack.url + path, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  return { status: res.status, type: res.headers.get('content-type'), json: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

const schema = (project: string) => ({
  targets: { t: { type: 'webhook', name: 't', url: `${rx.url}/${project}`, maxAttempts: 1 } },
  triggers: { go: { type: 'basic', name: 'go', target: 't', entity: 'Article', create: true, delete: false, update: false } },
})

const failedIds = async (project: string, token: string) => {
  const answer = await call('GET', `/v1/projects/${project}/events?state=failed`, token)
  return { status: answer.status, ids: ((answer.json['events'] ?? []) as Array<{ id: string }>).map(e => e.id) }
}

describe('the admin API on the local stack', () => {
  it('lets a viewer of A read A, refuses B and every write, lets an admin of A retry with one signal, and refuses a revoked token at once', async () => {
    let healthy = false
    rx.respond((_, res) => {
      res.statusCode = healthy ? 200 : 500
      res.end()
    })
    for (const project of ['A', 'B']) {
      expect(await call('PUT', `/v1/projects/${project}/schema`, local.stack.adminToken, schema(project))).toMatchObject({ status: 200 })
    }
    const viewer = await createToken(db.pool, { project: 'A', role: 'viewer' })
    const admin = await createToken(db.pool, { project: 'A', role: 'admin' })

    const enqueued = await call('POST', '/v1/projects/A/events', admin.token, {
      transactionId: TX,
      events: [{ trigger: 'go', payload: createPayload(1) }],
    })
    expect(enqueued.status).toBe(200)
    const [id] = enqueued.json['eventIds'] as string[]
    expect(id).toEqual(expect.any(String))
    await call('POST', '/v1/projects/B/events', local.stack.adminToken, {
      transactionId: TX,
      events: [{ trigger: 'go', payload: createPayload(2) }],
    })
    // One attempt each (maxAttempts 1), answered 500: dispatch fails both.
    await until('the event of A failed', async () => (await failedIds('A', viewer.token)).ids.includes(id ?? ''))
    await until('the event of B failed', async () => (await failedIds('B', local.stack.adminToken)).ids.length === 1)
    expect(await failedIds('A', viewer.token)).toEqual({ status: 200, ids: [id] })

    expect((await failedIds('B', viewer.token)).status).toBe(403)
    const writes: Array<[string, string, unknown]> = [
      ['POST', `/v1/projects/A/events/${id}/retry`, undefined],
      ['POST', '/v1/projects/A/events/retry', { state: 'failed' }],
      ['POST', '/v1/projects/A/targets/t/pause', undefined],
      ['PUT', '/v1/projects/A/schema', schema('A')],
      ['PATCH', '/v1/projects/A/variables', { variables: { K: 'v' } }],
      ['POST', '/v1/projects/A/events', { transactionId: TX, events: [] }],
      // Not a write, but the schema holds target URLs and headers: a viewer may not read it.
      ['GET', '/v1/projects/A/schema', undefined],
    ]
    for (const [method, path, body] of writes) {
      const answer = await call(method, path, viewer.token, body)
      expect(answer.status, `${method} ${path}`).toBe(403)
      expect(answer.type).toBe('application/problem+json')
    }
    expect((await call('POST', `/v1/projects/B/events/${id}/retry`, admin.token)).status).toBe(403)

    // The retry's one signal reaches dispatch through the emulator: the receiver gets the event again, now delivered.
    healthy = true
    const before = rx.requests.filter(r => r.path === '/A').length
    expect(await call('POST', `/v1/projects/A/events/${id}/retry`, admin.token)).toMatchObject({
      status: 200,
      json: { id, signalled: true },
    })
    await until('the retried event is delivered', () => rx.requests.filter(r => r.path === '/A').length > before)
    await until('its success is recorded', async () => (await failedIds('A', viewer.token)).ids.length === 0)
    expect((await call('GET', `/v1/projects/A/events/${id}`, viewer.token)).json).toMatchObject({ id, state: 'succeed' })
    // B's failed event was not touched by A's retry.
    expect((await failedIds('B', local.stack.adminToken)).ids).toHaveLength(1)

    expect(await revokeToken(db.pool, viewer.id)).toBe(true)
    const revoked = await call('GET', '/v1/projects/A/events?state=failed', viewer.token)
    expect(revoked.status).toBe(401)
    expect(revoked.type).toBe('application/problem+json')
  })

  it("serves the OpenAPI document to any valid caller and upstream's GraphQL API under /actions/", async () => {
    const viewer = await createToken(db.pool, { project: 'A', role: 'viewer' })
    expect(await call('GET', '/v1/openapi.json', viewer.token)).toMatchObject({
      status: 200,
      json: { openapi: expect.stringMatching(/^3\.1\./) },
    })
    expect((await call('GET', '/v1/openapi.json', undefined)).status).toBe(401)
    const graphql = await call('POST', '/actions/A', viewer.token, { query: '{ failedEvents(args: { limit: 10 }) { id } }' })
    expect(graphql.status).toBe(200)
    expect(graphql.json).toHaveProperty('data.failedEvents')
    expect((await call('POST', '/actions/B', viewer.token, { query: '{ eventsToProcess { id } }' })).status).toBe(403)
  })
})

// The REST event routes against a real database and the SQS emulator: handlers called with
// real deps and an authorized principal (authorization itself is the router's), edge cases through the
// real router with real tokens. Every answer is checked against the OpenAPI document.
import { randomUUID } from 'node:crypto'
import { beforeEach, describe, expect, it } from 'vitest'
import { restRoutes } from '../../lib/admin/rest.js'
import { createRouter } from '../../lib/admin/router.js'
import { createToken } from '../../lib/db/tokens.js'
import type { Principal, Route } from '../../lib/admin/types.js'
import { createPool } from '../../lib/db/pool.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { TX } from '../fixtures/schemas.js'
import { useHarness } from '../helpers/harness.js'
import { expectDocumented, routeForPath, routeOf } from '../helpers/openapi.js'
import { countStatements } from '../helpers/statements.js'

const env = useHarness({ project: 'rest' })
const router = createRouter(restRoutes)
/** What the local stack's bootstrap token is: a system caller. */
const SYSTEM_TOKEN = 'rest-test-system-token'
const system: Principal = { kind: 'system' }
const viewer = (project: string): Principal => ({ kind: 'token', tokenId: randomUUID(), project, role: 'viewer' })

type Call = {
  principal?: Principal
  params?: Record<string, string>
  query?: Record<string, string>
  body?: unknown
  deps?: typeof env.deps
}

/** Calls the handler of `method path` as the router would after authorizing, and checks the answer against the document. */
async function call(method: Route['method'], path: string, c: Call = {}) {
  const route = routeOf(restRoutes, method, path)
  const result = await route.handle({
    deps: c.deps ?? env.deps,
    principal: c.principal ?? system,
    params: { project: env.project, ...c.params },
    query: new URLSearchParams(c.query),
    body: c.body,
  })
  expectDocumented(route, result)
  return result
}

/** One request through the real router with a Bearer token; the answer (a problem too) checked against the document. */
async function request(
  method: Route['method'],
  path: string,
  token: string,
  query: Record<string, string> | Array<[string, string]> = {},
  body?: unknown,
) {
  const res = await router(
    env.deps,
    {
      method,
      path,
      query: new URLSearchParams(query),
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? '' : JSON.stringify(body),
    },
    { systemToken: SYSTEM_TOKEN },
  )
  const parsed: unknown = res.body ? JSON.parse(res.body) : undefined
  const route = routeForPath(restRoutes, method, path)
  if (route) expectDocumented(route, { status: res.status, body: parsed })
  return { status: res.status, type: res.headers['content-type'], body: parsed }
}

/** Makes events look as dispatch leaves a failed event: `attempts` log entries, failed, changed at `changedAt` plus i ms. */
async function fail(ids: string[], createdAt = '2024-05-01T00:00:00Z', attempts = 2) {
  await env.deps.db.query(
    // Resolved as the engine resolves: resolved_at, failed_at and last_state_change the same time.
    `UPDATE actions_event e SET state = 'failed', num_retries = $3, resolved_at = now() - n.i * interval '1 millisecond',
       failed_at = now() - n.i * interval '1 millisecond', visible_at = now() + interval '1 hour',
       created_at = $2::timestamptz + n.i * interval '1 second', last_state_change = now() - n.i * interval '1 millisecond',
       log = (SELECT jsonb_agg(jsonb_build_object('ok', false, 'code', 503, 'errorMessage', 'HTTP 503', 'durationMs', 12)) FROM generate_series(1, $3))
     FROM unnest($1::uuid[]) WITH ORDINALITY AS n(id, i) WHERE e.id = n.id`,
    [ids, createdAt, attempts],
  )
}

async function project(targets = ['a']) {
  await schemaFor(env.deps, env.project, Object.fromEntries(targets.map(t => [t, { url: 'http://127.0.0.1:9' }])))
}

beforeEach(async () => {
  await env.deps.db.query('DELETE FROM actions_event')
})

describe('GET /v1/projects/:project/events', () => {
  it('answers a viewer 200 with the failed events, newest change first, and pages through them by cursor', async () => {
    await project()
    const ids = await enqueueMany(env.deps, env.project, 'to_a', 250)
    await fail(ids)
    await enqueueMany(env.deps, env.project, 'to_a', 5, 1000)
    const seen: string[] = []
    let cursor: string | undefined
    for (;;) {
      const res = await call('GET', '/v1/projects/:project/events', {
        principal: viewer(env.project),
        query: { state: 'failed', ...(cursor ? { cursor } : {}) },
      })
      expect(res.status).toBe(200)
      const body = res.body as {
        events: Array<{ id: string; state: string; attempts: number; lastError: string | null }>
        nextCursor: string | null
      }
      expect(body.events.every(e => e.state === 'failed' && e.attempts === 2 && e.lastError === 'HTTP 503')).toBe(true)
      seen.push(...body.events.map(e => e.id))
      if (!body.nextCursor) break
      cursor = body.nextCursor
    }
    // last_state_change = now() - i ms: the first event changed last, so it comes first.
    expect(seen).toEqual(ids)
  })

  it('takes limit 1000 and refuses 1001, a bad cursor and unknown parameters with a 400 problem', async () => {
    await project()
    const { token } = await createToken(env.deps.db, { project: env.project, role: 'viewer' })
    const path = `/v1/projects/${env.project}/events`
    expect((await request('GET', path, token, { limit: '1000' })).status).toBe(200)
    const queries: Array<Record<string, string>> = [
      { limit: '1001' },
      { limit: '0' },
      { cursor: 'not-a-cursor' },
      { cursor: Buffer.from('1.x').toString('base64url') },
      { cursor: Buffer.from(`999999999999999999.${randomUUID()}`).toString('base64url') },
      { colour: 'red' },
    ]
    for (const query of queries) {
      const res = await request('GET', path, token, query)
      expect(res.status, JSON.stringify(query)).toBe(400)
      expect(res.type).toBe('application/problem+json')
    }
    // A parameter given twice is ambiguous: refused, not read as either.
    expect(
      (
        await request('GET', path, token, [
          ['limit', '1'],
          ['limit', '2'],
        ])
      ).status,
    ).toBe(400)
  })

  it('refuses a target name over 255 bytes, and a project name over 255 bytes, with 400', async () => {
    const long = await request('GET', `/v1/projects/${encodeURIComponent('é'.repeat(128))}/events`, SYSTEM_TOKEN)
    expect(long.status).toBe(400)
    expect(JSON.stringify(long.body)).toContain('255 bytes')
    await expect(call('GET', '/v1/projects/:project/events', { query: { target: 'x'.repeat(256) } })).rejects.toThrow(/255 bytes/)
  })

  it('filters by target and by a change-time window', async () => {
    await project(['a', 'b'])
    const a = await enqueueMany(env.deps, env.project, 'to_a', 3)
    const b = await enqueueMany(env.deps, env.project, 'to_b', 3, 10)
    await fail([...a, ...b])
    const res = await call('GET', '/v1/projects/:project/events', { query: { target: 'b' } })
    expect((res.body as { events: Array<{ id: string }> }).events.map(e => e.id).sort()).toEqual([...b].sort())
    const none = await call('GET', '/v1/projects/:project/events', { query: { until: '2000-01-01' } })
    expect((none.body as { events: unknown[] }).events).toEqual([])
  })
})

describe('GET /v1/projects/:project/events/:id', () => {
  it('answers the event with its attempt log, and 404 as a problem for an unknown one', async () => {
    await project()
    const [id = ''] = await enqueueMany(env.deps, env.project, 'to_a', 1)
    await fail([id], '2024-05-01T00:00:00Z', 3)
    const res = await call('GET', '/v1/projects/:project/events/:id', { params: { id }, principal: viewer(env.project) })
    const entry = { ok: false, code: 503, errorMessage: 'HTTP 503', durationMs: 12 }
    expect(res.body).toMatchObject({ id, state: 'failed', attempts: 3, lastError: 'HTTP 503', log: [entry, entry, entry] })
    const { token } = await createToken(env.deps.db, { project: env.project, role: 'viewer' })
    const missing = await request('GET', `/v1/projects/${env.project}/events/${randomUUID()}`, token)
    expect(missing).toMatchObject({ status: 404, type: 'application/problem+json', body: { status: 404, title: 'Not found' } })
    expect((await request('GET', `/v1/projects/${env.project}/events/not-a-uuid`, token)).status).toBe(400)
  })
})

describe('POST /v1/projects/:project/events', () => {
  it('enqueues with the path’s project, signals it once, and refuses a body naming another project', async () => {
    await project()
    const events = [{ trigger: 'to_a', payload: { operation: 'create', entity: 'Article', id: '1', values: {} } }]
    const res = await call('POST', '/v1/projects/:project/events', { body: { transactionId: TX, events } })
    expect(res.status).toBe(200)
    expect((res.body as { written: number }).written).toBe(1)
    expect(await env.queue.drain()).toEqual([{ project: env.project }])
    await expect(call('POST', '/v1/projects/:project/events', { body: { project: 'other', transactionId: TX, events } })).rejects.toThrow(
      /project/,
    )
    await expect(call('POST', '/v1/projects/:project/events', { body: { transactionId: 'x', events } })).rejects.toThrow(/transactionId/)
  })
})

describe('POST …/events/:id/retry and stop', () => {
  it('lets an admin retry a failed event of the project, and one SQS signal for it is observed', async () => {
    await project()
    const [id = ''] = await enqueueMany(env.deps, env.project, 'to_a', 1)
    await fail([id])
    await env.queue.drain()
    const admin: Principal = { kind: 'token', tokenId: randomUUID(), project: env.project, role: 'admin' }
    const res = await call('POST', '/v1/projects/:project/events/:id/retry', { params: { id }, principal: admin })
    expect(res.body).toEqual({ id, action: 'retry', signalled: true })
    expect(await env.queue.drain()).toEqual([{ project: env.project }])
    const { rows } = await env.deps.db.query('SELECT state FROM actions_event WHERE id = $1', [id])
    expect(rows[0]?.state).toBe('retrying')
    const stopped = await call('POST', '/v1/projects/:project/events/:id/stop', { params: { id } })
    expect(stopped.body).toEqual({ id, action: 'stop', signalled: false })
    expect(await env.queue.drain()).toEqual([])
    await expect(call('POST', '/v1/projects/:project/events/:id/retry', { params: { id: randomUUID() } })).rejects.toThrow(/no event/)
  })
})

describe('POST …/events/retry (bulk)', () => {
  it('retries 10,000 failed events in a time range with one statement, returns the count and sends one signal', async () => {
    await project()
    const inRange = await enqueueMany(env.deps, env.project, 'to_a', 10_000)
    await fail(inRange, '2024-05-01T00:00:00Z')
    const outside = await enqueueMany(env.deps, env.project, 'to_a', 20, 20_000)
    await fail(outside, '2024-06-01T00:00:00Z')
    await env.queue.drain()
    const pool = createPool(env.db.url, 2)
    const counter = countStatements(pool)
    try {
      const res = await call('POST', '/v1/projects/:project/events/retry', {
        deps: { ...env.deps, db: pool },
        body: { since: '2024-05-01', until: '2024-05-02T00:00:00Z' },
      })
      expect(counter.count()).toBe(1)
      expect(res.body).toEqual({
        action: 'retry',
        dryRun: false,
        matched: 10_000,
        changed: 10_000,
        skipped: 0,
        limit: 100_000,
        limitReached: false,
        signalled: true,
      })
    } finally {
      await pool.end()
    }
    expect(await env.queue.drain()).toEqual([{ project: env.project }])
    const { rows } = await env.deps.db.query<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY state ORDER BY state',
      [env.project],
    )
    expect(rows).toEqual([
      { state: 'retrying', n: 10_000 },
      { state: 'failed', n: 20 },
    ])
  }, 60_000)

  it('stops without a signal, honours the limit, and refuses since after until or an unknown field', async () => {
    await project()
    await fail(await enqueueMany(env.deps, env.project, 'to_a', 5))
    await env.queue.drain()
    const res = await call('POST', '/v1/projects/:project/events/stop', { body: { limit: 3 } })
    expect(res.body).toEqual({
      action: 'stop',
      dryRun: false,
      matched: 3,
      changed: 3,
      skipped: 0,
      limit: 3,
      limitReached: true,
      signalled: false,
    })
    expect(await env.queue.drain()).toEqual([])
    await expect(call('POST', '/v1/projects/:project/events/stop', { body: { since: '2024-05-02', until: '2024-05-01' } })).rejects.toThrow(
      /before/,
    )
    await expect(call('POST', '/v1/projects/:project/events/retry', { body: { states: 'failed' } })).rejects.toThrow()
    const none = await call('POST', '/v1/projects/:project/events/retry', {})
    expect(none.body).toMatchObject({ changed: 2, signalled: true })
  })
})

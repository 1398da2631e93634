// The smaller edges of the operator surface, each at its bound, over the local stack's real HTTP: a NUL
// in a query filter is a 400 like one in a path or body (it was a 500), every API answer says nosniff,
// and an over-long traceparent or tracestate header on POST /enqueue is ignored, as docs/enqueue.md
// says of a header that does not parse (it failed the request, blaming a body field never sent).
import { describe, expect, it } from 'vitest'
import { storeSchema } from '../../lib/db/schemas.js'
import { MAX_TRACEPARENT_CHARS, MAX_TRACESTATE_CHARS } from '../../lib/enqueue/request.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { useDatabase } from '../helpers/harness.js'
import { useLocalStack } from '../helpers/stack.js'

const db = useDatabase()
const local = useLocalStack(db)

async function send(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(local.stack.url + path, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${local.stack.adminToken}`, ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  })
  return { status: res.status, headers: res.headers, text: await res.text() }
}

describe('query filters', () => {
  it('answers a NUL in a query parameter 400, naming the parameter', async () => {
    await storeSchema(db.pool, 'edges', { targets: { t: { type: 'webhook', name: 't', url: 'http://127.0.0.1:9' } }, triggers: {} })
    for (const query of ['target=x%00', 'target=%00', 'state=failed%00']) {
      const res = await send('GET', `/v1/projects/edges/events?${query}`)
      expect(res.status, query).toBe(400)
      expect(res.headers.get('content-type')).toBe('application/problem+json')
      expect(res.text).toMatch(/query parameter (target|state)/)
    }
    expect((await send('GET', '/v1/projects/edges/events?target=x')).status).toBe(200)
  })
})

describe('answers', () => {
  it('carry x-content-type-options: nosniff, success and problem alike, REST and GraphQL', async () => {
    for (const [method, path, body] of [
      ['GET', '/v1/whoami', undefined],
      ['GET', '/v1/nowhere', undefined],
      ['GET', '/v1/projects/edges/events/not-an-id', undefined],
      ['POST', '/actions/edges', { query: '{ variables { name } }' }],
      ['POST', '/actions/edges', { query: '{' }],
    ] as const) {
      const res = await send(method, path, body)
      expect(res.headers.get('x-content-type-options'), `${method} ${path}`).toBe('nosniff')
    }
  })
})

describe('POST /enqueue trace headers', () => {
  it('ignores a traceparent past its bound and a tracestate past its bound, writing the events', async () => {
    await storeSchema(db.pool, 'traced', {
      targets: { t: { type: 'webhook', name: 't', url: 'http://127.0.0.1:9' } },
      triggers: { go: { type: 'basic', name: 'go', entity: 'Article', target: 't', create: true, delete: false, update: false } },
    })
    const valid = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    const cases: Array<Record<string, string>> = [
      { traceparent: valid.padEnd(MAX_TRACEPARENT_CHARS, '-') },
      { traceparent: 'x'.repeat(MAX_TRACEPARENT_CHARS + 1) },
      { traceparent: valid, tracestate: `a=${'b'.repeat(MAX_TRACESTATE_CHARS - 2)}` },
      { traceparent: valid, tracestate: `a=${'b'.repeat(MAX_TRACESTATE_CHARS - 1)}` },
    ]
    for (const headers of cases) {
      const what = `${headers['traceparent']?.length ?? 0} + ${headers['tracestate']?.length ?? 0}`
      const events = [{ trigger: 'go', payload: createPayload(1) }]
      const res = await send('POST', '/enqueue', { project: 'traced', transactionId: TX, events }, headers)
      expect(res.status, what).toBe(200)
      expect(JSON.parse(res.text), what).toMatchObject({ eventIds: [expect.any(String)] })
    }
  })
})

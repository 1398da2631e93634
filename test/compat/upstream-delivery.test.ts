// An upstream schema and upstream payloads, end to end: stored unchanged, enqueued as upstream's
// content engine builds them (and as mutations that fan out to its basic triggers), delivered through
// the real dispatch path, and received as upstream's WebhookTargetHandler would send them.
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { storeSchema } from '../../lib/db/schemas.js'
import { setVariables } from '../../lib/db/variables.js'
import { enqueue } from '../../lib/enqueue.js'
import { TX } from '../fixtures/schemas.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { headerLines } from '../helpers/receiver.js'

/** Raw header lines of each request, as [name, value] pairs in arrival order. */
const rawHeaders: Array<Array<[string, string]>> = []
const env = useHarness({
  config: { LEASE_MARGIN_MS: '1000' },
  receiver: (_, res) => {
    rawHeaders.push(headerLines(res))
    res.end()
  },
})

// Shapes upstream accepts (`Actions.Schema`): payloadPath, a body template, the target's own
// User-Agent, `update: ['title']`, `selection`, and a watch trigger `withNodes`.
const schema = (url: string) => ({
  targets: {
    hook: {
      type: 'webhook',
      name: 'hook',
      url,
      headers: { 'User-Agent': 'mine', Authorization: 'Bearer {{TOKEN}}' },
      body: { options: { a: 1 } },
      payloadPath: ['payload', 'json'],
      batchSize: 10,
    },
  },
  triggers: {
    title_changed: {
      type: 'basic',
      name: 'title_changed',
      entity: 'Article',
      create: false,
      delete: false,
      update: ['title'],
      target: 'hook',
      selection: ['id', 'title'],
    },
    tags: {
      type: 'watch',
      name: 'tags',
      entity: 'Article',
      watch: ['title', ['tags', {}, ['name']]],
      withNodes: true,
      target: 'hook',
      selection: ['id'],
    },
  },
})

// As upstream's TriggerPayloadBuilder builds them: a basic payload carries its `trigger` (and `nodes`,
// `selection`); a watch payload's base events carry `nodes` and `path`.
const basicPayload = {
  trigger: 'title_changed',
  operation: 'update',
  entity: 'Article',
  id: 7,
  values: { title: 'B' },
  old: { title: 'A' },
  selection: { id: 7, title: 'B' },
  nodes: [{ relation: 'author', entity: 'Author', id: 3 }],
}
// Another article than the basic payload's: one article's events go one at a time (per-entity order),
// and this test wants them all in one request.
const watchPayload = {
  operation: 'watch',
  trigger: 'tags',
  entity: 'Article',
  id: 6,
  selection: { id: 6 },
  events: [
    {
      operation: 'update',
      entity: 'Tag',
      id: 't1',
      values: { name: 'x' },
      old: { name: 'y' },
      path: ['tags'],
      nodes: [{ relation: 'tags', entity: 'Tag', id: 't1' }],
    },
  ],
}

describe('an upstream schema and upstream payloads, delivered', () => {
  it('arrive as upstream sends them: body template, payloadPath, meta then the payload as sent, one User-Agent, Content-Type, Accept and Accept-Encoding', async () => {
    await storeSchema(env.db.pool, 'upstream', schema(env.rx.url + '/hook'))
    await setVariables(env.db.pool, 'upstream', { TOKEN: 'tok-123' }, 'merge')
    const result = await enqueue(env.deps, {
      project: 'upstream',
      transactionId: TX,
      events: [
        { trigger: 'title_changed', payload: basicPayload },
        { trigger: 'tags', payload: watchPayload },
        // Mutations: a title change fires title_changed (update: ['title']); a change of another field fires nothing.
        { payload: { operation: 'update', entity: 'Article', id: 8, values: { title: 'New' }, old: { title: 'Old' } } },
        { payload: { operation: 'update', entity: 'Article', id: 9, values: { body: 'x' }, old: { body: 'y' } } },
      ],
    })
    expect(result.unmatched).toEqual([3])
    expect(result.eventIds).toHaveLength(3)
    await drainProject(env.deps, 'upstream', FOREVER)

    expect(env.rx.requests).toHaveLength(1)
    const { rows } = await env.db.pool.query<{
      id: string
      trigger: string
      created_at: Date
      payload: Record<string, unknown>
      state: string
    }>('SELECT id, trigger, created_at, payload, state FROM actions_event WHERE project = $1', ['upstream'])
    expect(rows.map(r => r.state)).toEqual(['succeed', 'succeed', 'succeed'])
    const fired = rows.find(r => r.payload.id === 8)
    expect(fired?.payload).toEqual({
      trigger: 'title_changed',
      operation: 'update',
      entity: 'Article',
      id: 8,
      values: { title: 'New' },
      old: { title: 'Old' },
    })
    // Upstream's formatBody: a copy of the body, the path walked to an object, `events` put into it.
    const expected = rows.map(r => ({
      meta: {
        eventId: r.id,
        transactionId: TX,
        identityId: null,
        ipAddress: null,
        userAgent: null,
        createdAt: r.created_at.toISOString(),
        lastStateChange: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        numRetries: 0,
        trigger: r.trigger,
        target: 'hook',
      },
      ...r.payload,
    }))
    const body = env.rx.requests[0]?.body
    expect(Object.keys(body)).toEqual(['options', 'payload'])
    expect(body.options).toEqual({ a: 1 })
    const byId = (events: Array<{ meta: { eventId: string } }>) => [...events].sort((a, b) => a.meta.eventId.localeCompare(b.meta.eventId))
    expect(byId(body.payload.json.events)).toEqual(byId(expected))
    const basic = body.payload.json.events.find((e: { id: unknown; trigger: unknown }) => e.id === 7 && e.trigger === 'title_changed')
    expect(basic).toMatchObject({ trigger: 'title_changed', nodes: basicPayload.nodes, selection: basicPayload.selection })

    const lines = (name: string) => (rawHeaders[0] ?? []).filter(([k]) => k.toLowerCase() === name).map(([, v]) => v)
    expect(lines('user-agent')).toEqual(['mine'])
    expect(lines('content-type')).toEqual(['application/json'])
    // What upstream's fetch adds to a request without them (`br` is offered over https only).
    expect(lines('accept')).toEqual(['*/*'])
    expect(lines('accept-encoding')).toEqual(['gzip, deflate'])
    expect(lines('authorization')).toEqual(['Bearer tok-123'])
  })

  it('stores and delivers a schema whose inline named target has a name other than its key, by the key', async () => {
    // As upstream's schema generator writes an inline target: keyed by the trigger, named by the author.
    await storeSchema(env.db.pool, 'inline', {
      targets: { article_published_target: { type: 'webhook', name: 'Search index', url: env.rx.url + '/inline' } },
      triggers: {
        article_published: {
          type: 'basic',
          name: 'article_published',
          entity: 'Article',
          create: true,
          delete: false,
          update: false,
          target: 'article_published_target',
        },
      },
    })
    env.rx.requests.length = 0
    const { eventIds } = await enqueue(env.deps, {
      project: 'inline',
      transactionId: TX,
      events: [{ payload: { operation: 'create', entity: 'Article', id: 1, values: {} } }],
    })
    expect(await drainProject(env.deps, 'inline', FOREVER)).toMatchObject({ succeeded: 1, failedUnknownTarget: 0 })
    expect(env.rx.requests.map(r => r.path)).toEqual(['/inline'])
    expect(env.rx.requests[0]?.body.events[0].meta).toMatchObject({ eventId: eventIds[0], target: 'article_published_target' })
  })
})

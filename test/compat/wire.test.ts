// Compatibility fixtures: what upstream's WebhookTargetHandler sends and concludes for each case
// (request bodies, header lines, variables, response classification), run through the real dispatch
// path against a recording receiver on 127.0.0.1.
import type { ServerResponse } from 'node:http'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { beforeEach, describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { setVariables } from '../../lib/db/variables.js'
import { parseActionsSchema } from '../../lib/schema/actions.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { headerLines, type ReceivedRequest } from '../helpers/receiver.js'

const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 'wire' })
/** Raw header lines of each request, as [name, value] pairs in arrival order. */
let rawHeaders: Array<Array<[string, string]>> = []

beforeEach(() => {
  rawHeaders = []
  answer((_, res) => {
    res.end()
  })
})

/** Answers with `responder`, recording the raw header lines of every request first. */
function answer(responder: (req: ReceivedRequest, res: ServerResponse) => void) {
  env.rx.respond((req, res) => {
    rawHeaders.push(headerLines(res))
    responder(req, res)
  })
}

/** Stores one target `t` (plus options), enqueues `count` events to it, drains once; returns the event ids. */
async function deliverOnce(target: Record<string, unknown>, count = 1): Promise<string[]> {
  await schemaFor(env.deps, env.project, { t: { url: env.rx.url + '/hook', batchSize: 10, maxAttempts: 5, ...target } })
  const ids = await enqueueMany(env.deps, env.project, 'to_t', count)
  await drainProject(env.deps, env.project, FOREVER)
  return ids
}

/** Upstream's wire shape of the events (`meta` then the payload), in the order given. */
async function expectedEvents(ids: string[]) {
  const { rows } = await env.deps.db.query<{ id: string; created_at: Date }>(
    'SELECT id, created_at FROM actions_event WHERE id = ANY($1)',
    [ids],
  )
  const created = new Map(rows.map(r => [r.id, r.created_at.toISOString()]))
  return ids.map((id, i) => ({
    meta: {
      eventId: id,
      transactionId: TX,
      identityId: null,
      ipAddress: null,
      userAgent: null,
      createdAt: created.get(id),
      lastStateChange: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      numRetries: 0,
      trigger: 'to_t',
      target: 't',
    },
    ...createPayload(i),
  }))
}

const sortById = <T extends { meta: { eventId: string } }>(events: T[]) =>
  [...events].sort((a, b) => a.meta.eventId.localeCompare(b.meta.eventId))
const linesNamed = (name: string, req = 0) => (rawHeaders[req] ?? []).filter(([k]) => k.toLowerCase() === name)

describe('request body (payloadPath)', () => {
  it('sends { events } when no payloadPath is set', async () => {
    const ids = await deliverOnce({}, 2)
    expect(env.rx.requests).toHaveLength(1)
    const body = env.rx.requests[0]?.body
    expect(Object.keys(body)).toEqual(['events'])
    expect(sortById(body.events)).toEqual(sortById(await expectedEvents(ids)))
  })

  // The schema module decides whether `[]` is stored; the wire must treat it as upstream does once it is.
  const acceptsEmptyPath = (() => {
    try {
      parseActionsSchema({ targets: { t: { type: 'webhook', name: 't', url: 'http://x', payloadPath: [] } }, triggers: {} })
      return true
    } catch {
      return false
    }
  })()
  it.runIf(acceptsEmptyPath)('sends { events } for payloadPath []', async () => {
    await deliverOnce({ payloadPath: [] })
    expect(Object.keys(env.rx.requests[0]?.body)).toEqual(['events'])
  })

  it("sends { options: 1, payload: { json: { events } } } for body { options: 1 } and payloadPath ['payload', 'json']", async () => {
    const ids = await deliverOnce({ body: { options: 1 }, payloadPath: ['payload', 'json'] })
    const body = env.rx.requests[0]?.body
    expect(body).toEqual({ options: 1, payload: { json: { events: await expectedEvents(ids) } } })
    expect(Object.keys(body)).toEqual(['options', 'payload'])
  })

  it('adds events to an object of the body template, keeping its other keys', async () => {
    await deliverOnce({ body: { data: { keep: true, list: [1, 2] }, source: 'cms' }, payloadPath: ['data'] })
    const body = env.rx.requests[0]?.body
    expect(body.source).toBe('cms')
    expect(Object.keys(body.data)).toEqual(['keep', 'list', 'events'])
    expect(body.data.events).toHaveLength(1)
  })

  it('fails the attempt, without a request, when the path runs into a value that is not an object', async () => {
    const [id] = await deliverOnce({ body: { data: 5 }, payloadPath: ['data', 'x'] })
    expect(env.rx.requests).toHaveLength(0)
    const row = (await states(env.deps, env.project)).get(id ?? '')
    expect(row).toMatchObject({ state: 'retrying', num_retries: 1 })
    expect(row?.log[0]).toMatchObject({ ok: false, errorMessage: expect.stringMatching(/^Invalid payloadPath/) })
  })
})

describe('headers', () => {
  it('sends User-Agent: Contember Actions, Content-Type: application/json, and the Accept and Accept-Encoding fetch adds, one line each', async () => {
    await deliverOnce({ headers: { 'X-Static': 'yes' } })
    expect(linesNamed('user-agent').map(([, v]) => v)).toEqual(['Contember Actions'])
    expect(linesNamed('content-type').map(([, v]) => v)).toEqual(['application/json'])
    expect(linesNamed('accept').map(([, v]) => v)).toEqual(['*/*'])
    // fetch offers br only over https; the receiver here is http.
    expect(linesNamed('accept-encoding').map(([, v]) => v)).toEqual(['gzip, deflate'])
    expect(linesNamed('x-static').map(([, v]) => v)).toEqual(['yes'])
  })

  it.each([
    ['Accept', 'accept'],
    ['ACCEPT-ENCODING', 'accept-encoding'],
  ])("keeps the target's own %s in one line", async (name, lower) => {
    await deliverOnce({ headers: { [name]: 'mine' } })
    expect(linesNamed(lower).map(([, v]) => v)).toEqual(['mine'])
  })

  it.each([['User-Agent'], ['user-agent'], ['USER-AGENT']])("keeps the target's own %s in one line", async name => {
    await deliverOnce({ headers: { [name]: 'my-agent/1' } })
    expect(linesNamed('user-agent').map(([, v]) => v)).toEqual(['my-agent/1'])
  })

  it.each([['Content-Type'], ['content-type'], ['CONTENT-TYPE']])(
    "overrides the target's %s with application/json, in one line",
    async name => {
      await deliverOnce({ headers: { [name]: 'text/plain' } })
      expect(linesNamed('content-type').map(([, v]) => v)).toEqual(['application/json'])
    },
  )

  it('sends one line for a name the target wrote in two cases', async () => {
    await deliverOnce({ headers: { 'X-Tag': 'a', 'x-tag': 'b' } })
    expect(linesNamed('x-tag')).toHaveLength(1)
  })
})

describe('headers on the wire, as upstream sends them', () => {
  // Declared in an order jsonb would re-sort (it puts shorter keys first): the wire must keep this one.
  const declared = { 'X-Custom-Header': 'custom', Authorization: 'Bearer abc', 'X-A': 'a' }

  it("sends upstream's case and order: host, connection, User-Agent, the target's headers as declared, Content-type, accept, accept-encoding, content-length", async () => {
    await deliverOnce({ headers: declared })
    const lines = rawHeaders[0] ?? []
    expect(lines.map(([name]) => name)).toEqual([
      'host',
      'connection',
      'User-Agent',
      'X-Custom-Header',
      'Authorization',
      'X-A',
      'Content-type',
      'accept',
      'accept-encoding',
      'content-length',
    ])
    expect(lines.slice(2, 9)).toEqual([
      ['User-Agent', 'Contember Actions'],
      ['X-Custom-Header', 'custom'],
      ['Authorization', 'Bearer abc'],
      ['X-A', 'a'],
      ['Content-type', 'application/json'],
      ['accept', '*/*'],
      ['accept-encoding', 'gzip, deflate'],
    ])
  })

  it('puts the same bytes on a raw socket: names as written, in that order', async () => {
    const heads: string[] = []
    const server = createNetServer(socket => {
      let text = ''
      socket.on('data', chunk => {
        text += chunk.toString('latin1')
        const end = text.indexOf('\r\n\r\n')
        if (end < 0) return
        heads.push(text.slice(0, end))
        socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
      })
    })
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      await schemaFor(env.deps, env.project, { t: { url: `http://127.0.0.1:${port}/raw`, headers: declared } })
      await enqueueMany(env.deps, env.project, 'to_t', 1)
      await drainProject(env.deps, env.project, FOREVER)
    } finally {
      await new Promise(resolve => server.close(resolve))
    }
    const [requestLine, ...lines] = (heads[0] ?? '').split('\r\n')
    expect(requestLine).toBe('POST /raw HTTP/1.1')
    expect(lines.slice(2, 9)).toEqual([
      'User-Agent: Contember Actions',
      'X-Custom-Header: custom',
      'Authorization: Bearer abc',
      'X-A: a',
      'Content-type: application/json',
      'accept: */*',
      'accept-encoding: gzip, deflate',
    ])
  })

  it("keeps a target's own User-Agent in User-Agent's place and drops its Content-Type for ours, last", async () => {
    await deliverOnce({ headers: { 'X-B': 'b', 'user-agent': 'mine/1', 'content-type': 'text/plain', Accept: 'application/json' } })
    expect((rawHeaders[0] ?? []).slice(2, -1)).toEqual([
      ['User-Agent', 'mine/1'],
      ['X-B', 'b'],
      ['Accept', 'application/json'],
      ['Content-type', 'application/json'],
      ['accept-encoding', 'gzip, deflate'],
    ])
  })

  it('joins two spellings of one name under the first, in its place, as fetch joins them', async () => {
    await deliverOnce({ headers: { 'X-Tag': 'a', 'X-Other': 'o', 'x-tag': 'b' } })
    expect((rawHeaders[0] ?? []).slice(3, 5)).toEqual([
      ['X-Tag', 'a, b'],
      ['X-Other', 'o'],
    ])
  })

  it('keeps the body template in the order the schema wrote it, the events last where payloadPath leads', async () => {
    await deliverOnce({ body: { source: 'cms', nested: { z: 1, a: { y: 2, b: 3 } } }, payloadPath: ['nested'] })
    const raw = env.rx.requests[0]?.raw ?? ''
    expect(raw.startsWith('{"source":"cms","nested":{"z":1,"a":{"y":2,"b":3},"events":[{"meta":{')).toBe(true)
  })
})

describe('meta.lastStateChange', () => {
  it("is the event's previous state change: its creation on the first attempt, its last failure on a retry", async () => {
    answer((_, res) => {
      res.statusCode = 500
      res.end()
    })
    const [id] = await deliverOnce({})
    const failed = await env.deps.db.query<{ created: Date; changed: Date }>(
      'SELECT created_at AS created, last_state_change AS changed FROM actions_event WHERE id = $1',
      [id],
    )
    const { created, changed } = failed.rows[0]!
    // Due again now; the failure's change stays what the claim finds.
    await env.deps.db.query('UPDATE actions_event SET visible_at = now() WHERE id = $1', [id])
    answer((_, res) => {
      res.end()
    })
    await drainProject(env.deps, env.project, FOREVER)
    const metas = env.rx.requests.map(r => r.body.events[0].meta)
    expect(metas.map(m => [m.numRetries, m.createdAt, m.lastStateChange])).toEqual([
      [0, created.toISOString(), created.toISOString()],
      [1, created.toISOString(), changed.toISOString()],
    ])
    expect(changed.getTime()).toBeGreaterThan(created.getTime())
  })
})

describe('variables', () => {
  it('substitutes {{NAME}} in the URL and header values, and leaves {{ NAME }}, {{a.b}} and {{a-b}} as text', async () => {
    await setVariables(env.deps.db, env.project, { PATH: 'hooks', TOKEN: 'tok_123456', 'a.b': 'x', 'a-b': 'y' }, 'set')
    await deliverOnce({
      url: env.rx.url + '/{{PATH}}/in',
      headers: { Authorization: 'Bearer {{TOKEN}}', 'X-Spaced': '{{ TOKEN }}', 'X-Dotted': '{{a.b}}', 'X-Dashed': '{{a-b}}' },
    })
    expect(env.rx.requests[0]?.path).toBe('/hooks/in')
    expect(env.rx.requests[0]?.headers).toMatchObject({
      authorization: 'Bearer tok_123456',
      'x-spaced': '{{ TOKEN }}',
      'x-dotted': '{{a.b}}',
      'x-dashed': '{{a-b}}',
    })
  })

  it.each([
    ['missing', {}],
    ['empty', { TOKEN: '' }],
  ])('fails the attempt with "Undefined variable TOKEN" and no request when it is %s', async (_, vars) => {
    await setVariables(env.deps.db, env.project, vars, 'set')
    const [id] = await deliverOnce({ headers: { Authorization: 'Bearer {{TOKEN}}' } })
    expect(env.rx.requests).toHaveLength(0)
    const row = (await states(env.deps, env.project)).get(id ?? '')
    expect(row).toMatchObject({ state: 'retrying', num_retries: 1 })
    expect(row?.log).toEqual([{ ok: false, errorMessage: 'Undefined variable TOKEN', durationMs: expect.any(Number) }])
  })
})

type Responder = (req: ReceivedRequest, res: ServerResponse) => void
const reply =
  (status: number, body: string, contentType?: string, reason?: string): Responder =>
  (_, res) => {
    if (reason) res.statusMessage = reason
    res.writeHead(status, contentType ? { 'content-type': contentType } : {})
    res.end(body)
  }
/** The body listing `failures` for the second event of the batch (ids are known only at request time). */
const failSecond =
  (entry: (id: string) => unknown, contentType = 'application/json'): Responder =>
  (req, res) => {
    const second = req.body.events[1].meta.eventId
    reply(200, JSON.stringify({ failures: [entry(second)] }), contentType)(req, res)
  }

describe('response classification', () => {
  /** The events' rows after one delivery, in the order the batch listed them. */
  async function classify(responder: Responder) {
    answer(responder)
    const ids = await deliverOnce({}, 2)
    const sent: string[] = (env.rx.requests[0]?.body.events ?? []).map((e: { meta: { eventId: string } }) => e.meta.eventId)
    expect([...sent].sort()).toEqual([...ids].sort())
    const rows = await states(env.deps, env.project)
    return sent.map(id => rows.get(id))
  }
  const succeeded = { state: 'succeed', num_retries: 1, log: [] }

  it('fails every event on a non-2xx, with the code, the reason phrase and the response', async () => {
    for (const row of await classify(reply(503, 'down for maintenance', 'text/plain', 'Gone Fishing'))) {
      expect(row).toMatchObject({ state: 'retrying', num_retries: 1 })
      expect(row?.log).toEqual([
        { ok: false, code: 503, errorMessage: 'Gone Fishing', response: 'down for maintenance', durationMs: expect.any(Number) },
      ])
    }
  })

  it('does not follow a redirect: a 3xx is a failed attempt', async () => {
    const rows = await classify((_, res) => {
      res.writeHead(307, { location: env.rx.url + '/elsewhere' })
      res.end()
    })
    expect(env.rx.requests).toHaveLength(1)
    for (const row of rows) expect(row?.log[0]).toMatchObject({ ok: false, code: 307, errorMessage: 'Temporary Redirect' })
  })

  it.each<[string, Responder]>([
    ['an empty body', reply(200, '', 'application/json')],
    [
      'a 204',
      (_, res) => {
        res.writeHead(204)
        res.end()
      },
    ],
    ['a non-JSON content type listing failures', failSecond(id => ({ eventId: id }), 'text/plain')],
    [
      'no content type listing failures',
      (req, res) => {
        res.removeHeader('content-type')
        res.end(JSON.stringify({ failures: [{ eventId: req.body.events[1].meta.eventId }] }))
      },
    ],
    ['a JSON array', reply(200, '[{"failures":[]}]', 'application/json')],
    ['JSON null', reply(200, 'null', 'application/json')],
    ['a JSON object without failures', reply(200, '{"ok":true,"received":2}', 'application/json')],
    ['an empty failures list', reply(200, '{"failures":[]}', 'application/json')],
    ['non-JSON text over the read limit', reply(200, 'x'.repeat(1_100_000), 'text/html')],
  ])('succeeds every event on a 2xx with %s', async (_, responder) => {
    for (const row of await classify(responder)) expect(row).toMatchObject(succeeded)
  })

  it('fails only the events listed in failures, with their error; entries may carry other keys', async () => {
    const [first, second] = await classify(
      failSecond(id => ({ eventId: id, error: 'no such article', retryable: true }), 'application/json; charset=utf-8'),
    )
    expect(first).toMatchObject(succeeded)
    expect(second).toMatchObject({ state: 'retrying', num_retries: 1 })
    expect(second?.log).toEqual([{ ok: false, code: 200, errorMessage: 'no such article', durationMs: expect.any(Number) }])
  })

  it('reads failures from any content type that mentions json', async () => {
    const [first, second] = await classify(failSecond(id => ({ eventId: id }), 'application/problem+json'))
    expect(first).toMatchObject(succeeded)
    expect(second).toMatchObject({ state: 'retrying', log: [{ ok: false, code: 200 }] })
  })

  it.each<[string, Responder]>([
    ['a key beside failures', (req, res) => reply(200, JSON.stringify({ failures: [], ok: true }), 'application/json')(req, res)],
    ['failures that is not an array', reply(200, '{"failures":{}}', 'application/json')],
    ['an entry without eventId', reply(200, '{"failures":[{"error":"x"}]}', 'application/json')],
    ['a numeric eventId', reply(200, '{"failures":[{"eventId":7}]}', 'application/json')],
    ['a non-string error', failSecond(id => ({ eventId: id, error: { code: 1 } }))],
    ['an id outside the batch', failSecond(() => ({ eventId: '00000000-0000-4000-8000-000000000000' }))],
    ['JSON that does not parse', reply(200, '{"failures":[', 'application/json')],
    ['JSON over the read limit', reply(200, '{"failures":[],"pad":"' + 'x'.repeat(1_100_000) + '"}', 'application/json')],
  ])('fails every event with "Invalid response: …" on %s', async (_, responder) => {
    for (const row of await classify(responder)) {
      expect(row).toMatchObject({ state: 'retrying', num_retries: 1 })
      expect(row?.log[0]).toMatchObject({
        ok: false,
        code: 200,
        errorMessage: expect.stringMatching(/^Invalid response: /),
        response: expect.any(String),
      })
    }
  })

  it.each<[string, string, string]>([
    ['a key beside failures', '{"failures":[],"ok":true}', 'value at root: extra property ok found'],
    ['failures that is not an array', '{"failures":{}}', 'value at path /failures: must be array, {} given'],
    ['an entry without eventId', '{"failures":[{"error":"x"}]}', 'value at path /failures/0/eventId: must be string, undefined given'],
  ])("keeps upstream's text for %s", async (_, body, problem) => {
    for (const row of await classify(reply(200, body, 'application/json')))
      expect(row?.log[0]).toMatchObject({ errorMessage: `Invalid response: ${problem}`, response: body })
  })

  it("keeps upstream's text for ids outside the batch", async () => {
    const [row] = await classify(reply(200, '{"failures":[{"eventId":"nope"}]}', 'application/json'))
    expect(row?.log[0]).toMatchObject({
      errorMessage: 'Invalid response: undefined events IDs: nope',
      response: '{"failures":[{"eventId":"nope"}]}',
    })
  })
})

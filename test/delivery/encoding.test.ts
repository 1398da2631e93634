// Replies read as upstream's fetch reads them: content codings decoded, the read limit counted in
// decoded bytes (a gzip bomb is cut there, in bounded memory, its socket closed), one leading BOM
// stripped, and the request saying what it accepts. Real HTTP on 127.0.0.1, through `deliver`.
import type { ServerResponse } from 'node:http'
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib'
import { Agent } from 'undici'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { ClaimedEvent } from '../../lib/events.js'
import { MAX_RESPONSE_BYTES } from '../../lib/delivery/response.js'
import { addressTarget, deliver, type Delivery } from '../../lib/delivery/webhook.js'
import type { WebhookTarget } from '../../lib/schema/actions.js'
import { useReceiver } from '../helpers/harness.js'
import { headerLines, type ReceivedRequest } from '../helpers/receiver.js'
import { logCapture } from '../helpers/runtime.js'

const rx = useReceiver()
let http: Agent
const { log } = logCapture()
const MiB = 1024 * 1024

beforeAll(() => {
  http = new Agent({ keepAliveTimeout: 10_000 })
})
afterAll(async () => {
  await http.close()
})

const events: ClaimedEvent[] = [1, 2, 3].map(i => ({
  id: `0f8fad5b-d9cb-469f-a165-70867728950${i}`,
  transaction_id: '7f1b6a8e-3b1c-4a55-9d63-0c3f1d2e4a10',
  num_retries: 0,
  target: 'hook',
  trigger: 'to_hook',
  identity_id: null,
  ip_address: null,
  user_agent: null,
  lease: '2024-03-01 00:00:00+00',
  created_at: '2024-03-01T00:00:00.000Z',
  last_state_change: '2024-03-01T00:00:00.000Z',
  payload: `{"n": ${i}}`,
}))

/** Delivers the three events to the receiver (path `/hook`) as target `t` (plus options). */
function send(t: Partial<WebhookTarget> = {}, timeoutMs = 5_000): Promise<Delivery> {
  const target: WebhookTarget = { type: 'webhook', name: 'hook', url: rx.url + '/hook', ...t }
  return deliver(http, { target, address: addressTarget(target, new Map()), timeoutMs }, events, log)
}

/** Answers 200 with `body`, already encoded, under `headers`. */
const answer = (body: Buffer, headers: Record<string, string>) => (_: ReceivedRequest, res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'application/json', ...headers })
  res.end(body)
}

const failures = Buffer.from(JSON.stringify({ failures: [{ eventId: events[1]?.id, error: 'e' }] }))
const BOM = Buffer.from([0xef, 0xbb, 0xbf])

describe('a reply in a content coding', () => {
  let plain: Delivery['outcomes']
  beforeAll(async () => {
    rx.respond(answer(failures, {}))
    plain = (await send()).outcomes
    expect(plain.get(events[1]?.id ?? '')).toEqual({ ok: false, code: 200, errorMessage: 'e', kind: 'rejected' })
    expect(plain.get(events[0]?.id ?? '')).toEqual({ ok: true, code: 200 })
  })

  it.each([
    ['gzip', gzipSync(failures), 'gzip'],
    ['x-gzip', gzipSync(failures), 'x-gzip'],
    ['deflate, zlib-wrapped', deflateSync(failures), 'deflate'],
    ['deflate, raw', deflateRawSync(failures), 'deflate'],
    ['br', brotliCompressSync(failures), 'br'],
    ['gzip then br (decoded in reverse order)', brotliCompressSync(gzipSync(failures)), 'gzip, br'],
    ['upper case, with identity', gzipSync(failures), 'identity, GZIP'],
  ])('has the outcomes of the same reply sent plain: %s', async (_, body, coding) => {
    rx.respond(answer(body, { 'content-encoding': coding }))
    expect((await send()).outcomes).toEqual(plain)
  })

  it('has the outcomes of the same reply sent plain when it starts with a UTF-8 byte order mark', async () => {
    rx.respond(answer(Buffer.concat([BOM, failures]), {}))
    expect((await send()).outcomes).toEqual(plain)
    rx.respond(answer(gzipSync(Buffer.concat([BOM, failures])), { 'content-encoding': 'gzip' }))
    expect((await send()).outcomes).toEqual(plain)
  })

  it('has the outcomes of the same reply sent plain when the compressed bytes arrive a few at a time', async () => {
    const body = deflateRawSync(failures)
    rx.respond((_, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'deflate' })
      let at = 0
      const next = () => {
        if (at >= body.length) return res.end()
        res.write(body.subarray(at, (at += 3)))
        setTimeout(next, 1)
      }
      next()
    })
    expect((await send()).outcomes).toEqual(plain)
  })

  it('delivers every event for an empty gzip reply, and for a BOM alone', async () => {
    rx.respond(answer(gzipSync(''), { 'content-encoding': 'gzip' }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
    rx.respond(answer(BOM, {}))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
  })

  it('stores the decoded text of an error status', async () => {
    rx.respond((_, res) => {
      res.writeHead(500, { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
      res.end(gzipSync('the database is down'))
    })
    for (const o of (await send()).outcomes.values())
      expect(o).toEqual({
        ok: false,
        code: 500,
        errorMessage: 'Internal Server Error',
        response: 'the database is down',
        kind: 'down',
        wholeBatch: true,
      })
  })
})

describe('a reply that cannot be decoded', () => {
  const invalid = (problem: string) => ({
    ok: false,
    code: 200,
    errorMessage: `Invalid response: ${problem}`,
    response: '',
    kind: 'rejected',
    wholeBatch: true,
  })

  it('fails every event with "body could not be decoded" for a corrupt gzip JSON body, quoting nothing', async () => {
    const corrupt = gzipSync(failures)
    corrupt.fill(0x41, 12, 40)
    for (const body of [Buffer.from('{"failures": "not gzip"}'), corrupt]) {
      rx.respond(answer(body, { 'content-encoding': 'gzip' }))
      for (const o of (await send()).outcomes.values()) expect(o).toEqual(invalid('body could not be decoded'))
    }
  })

  it.each([
    ['deflate, zlib-wrapped with a bad header check', 'deflate', Buffer.from([0x78, 0x00, 0x01, 0x02])],
    ['deflate, raw with a reserved block type', 'deflate', Buffer.from([0x07, 0x00, 0x01, 0x02])],
    ['br', 'br', Buffer.from('{"failures": [{"eventId": "x"}]} is no brotli stream')],
  ])('fails every event with "body could not be decoded" for a corrupt JSON body: %s', async (_, coding, body) => {
    rx.respond(answer(body, { 'content-encoding': coding }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual(invalid('body could not be decoded'))
  })

  it('fails every event with "unsupported content encoding" for an unknown coding of a JSON body', async () => {
    for (const coding of ['zstd', 'compress', 'gzip, snappy', 'gzip, gzip, gzip, gzip, gzip, gzip']) {
      rx.respond(answer(failures, { 'content-encoding': coding }))
      for (const o of (await send()).outcomes.values()) expect(o).toEqual(invalid('unsupported content encoding'))
    }
  })

  it('delivers every event when the body need not be read: a content type without json, or an empty body', async () => {
    rx.respond(answer(failures, { 'content-type': 'text/plain', 'content-encoding': 'zstd' }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
    rx.respond(answer(Buffer.from('not gzip'), { 'content-type': 'text/plain', 'content-encoding': 'gzip' }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
    rx.respond(answer(Buffer.alloc(0), { 'content-encoding': 'zstd' }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
  })
})

describe('the read limit on a compressed reply', () => {
  it('cuts a 1 GiB gzip bomb at the limit in bounded memory, closing the socket before it is all sent', async () => {
    // One gzip member of 1 MiB of zeros (about 1 KiB), sent 1024 times: Node's gunzip reads every member.
    const member = gzipSync(Buffer.alloc(MiB))
    const members = 1024
    let sent = 0
    let peakRss = 0
    const closed = new Promise<number>(resolve => {
      rx.respond((_, res) => {
        let open = true
        res.on('close', () => {
          open = false
          resolve(sent)
        })
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
        // A member a millisecond, so sending all takes a second: the whole bomb (1 MiB compressed) would
        // otherwise fit in the loopback socket's buffers before the client has read two members.
        const next = () => {
          peakRss = Math.max(peakRss, process.memoryUsage().rss)
          if (!open) return
          if (sent === members) return res.end()
          sent++
          if (res.write(member)) setTimeout(next, 1)
          else res.once('drain', next)
        }
        next()
      })
    })
    const before = process.memoryUsage()
    const { outcomes } = await send()
    const after = process.memoryUsage()
    peakRss = Math.max(peakRss, after.rss)

    for (const o of outcomes.values())
      expect(o).toMatchObject({ ok: false, code: 200, errorMessage: `Invalid response: body longer than ${MAX_RESPONSE_BYTES} bytes` })
    expect(peakRss - before.rss).toBeLessThan(64 * MiB)
    expect(after.heapUsed + after.external - before.heapUsed - before.external).toBeLessThan(64 * MiB)
    // The limit is crossed in the second member; the socket closed long before the 1024th.
    expect(await closed).toBeLessThan(members / 4)
  })

  it.each([
    ['deflate, zlib-wrapped', 'deflate', deflateSync],
    ['deflate, raw', 'deflate', deflateRawSync],
    ['br', 'br', brotliCompressSync],
    ['two codings', 'gzip, br', (b: Buffer) => brotliCompressSync(gzipSync(b))],
  ])('cuts an 8 MiB body at the limit in %s too', async (_, coding, encode) => {
    rx.respond(answer(encode(Buffer.alloc(8 * MiB, 'a')), { 'content-encoding': coding }))
    for (const o of (await send()).outcomes.values())
      expect(o).toMatchObject({ errorMessage: `Invalid response: body longer than ${MAX_RESPONSE_BYTES} bytes` })
  })

  it('reads a compressed body of exactly the limit whole', async () => {
    const body = Buffer.concat([Buffer.from('{"ok":"'), Buffer.alloc(MAX_RESPONSE_BYTES - 9, 'a'), Buffer.from('"}')])
    expect(body.length).toBe(MAX_RESPONSE_BYTES)
    rx.respond(answer(gzipSync(body), { 'content-encoding': 'gzip' }))
    for (const o of (await send()).outcomes.values()) expect(o).toEqual({ ok: true, code: 200 })
  })

  it("ends a compressed reply that stalls mid-body at the target's timeout", async () => {
    const body = gzipSync(failures)
    rx.respond((_, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
      res.write(body.subarray(0, body.length >> 1))
    })
    const started = performance.now()
    const { outcomes } = await send({}, 300)
    expect(performance.now() - started).toBeLessThan(3_000)
    for (const o of outcomes.values())
      expect(o).toEqual({ ok: false, errorMessage: 'Timeout after 300 ms', kind: 'down', wholeBatch: true })
  })
})

describe('the request', () => {
  /** Raw header lines of the last request, as [name, value] pairs in arrival order. */
  let rawHeaders: Array<[string, string]> = []
  const lines = (name: string) => rawHeaders.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v)
  beforeEach(() => {
    rawHeaders = []
    rx.respond((_, res) => {
      rawHeaders = headerLines(res)
      res.end()
    })
  })

  it('says it accepts any type in gzip or deflate over http, one line each', async () => {
    await send()
    expect(lines('accept')).toEqual(['*/*'])
    expect(lines('accept-encoding')).toEqual(['gzip, deflate'])
  })

  it.each([['Accept-Encoding'], ['accept-encoding'], ['ACCEPT-ENCODING']])("sends the target's own %s instead, in one line", async name => {
    await send({ headers: { [name]: 'identity', Accept: 'application/json' } })
    expect(lines('accept-encoding')).toEqual(['identity'])
    expect(lines('accept')).toEqual(['application/json'])
  })

  it('offers br as well over https, as fetch does', () => {
    const address = addressTarget({ type: 'webhook', name: 'hook', url: 'https://example.com/hook' }, new Map())
    expect(address.ok && address.headers).toMatchObject({ accept: '*/*', 'accept-encoding': 'br, gzip, deflate' })
  })
})

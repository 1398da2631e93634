import { describe, expect, it } from 'vitest'
import { interpretResponse, MAX_RESPONSE_BYTES, type HttpResponse } from '../lib/delivery/response.js'
import { createLogger } from '../lib/log.js'
import { PayloadPathError, requestBody, substitute, UndefinedVariableError } from '../lib/delivery/template.js'
import { cleanText, MIN_REDACTED_LENGTH, redactor, REDACTED } from '../lib/text.js'
import type { WebhookTarget } from '../lib/schema/actions.js'

const ids = ['e1', 'e2', 'e3']
const JSON_TYPE = 'application/json; charset=utf-8'
/** `null` stands for a response without a content type. */
const res = (status: number, body = '', contentType: string | null = JSON_TYPE, truncated = false): HttpResponse =>
  ({ status, statusText: status === 500 ? 'Internal Server Error' : 'OK', contentType: contentType ?? undefined, body, truncated })
const run = (r: HttpResponse, redact?: (t: string) => string) => {
  const lines: string[] = []
  const out = interpretResponse(r, ids, 'hook', createLogger('debug', l => { lines.push(l) }), redact)
  return { out: Object.fromEntries(out), logs: lines.map(l => JSON.parse(l)) }
}

describe('interpreting a webhook response', () => {
  it('fails every event on a non-2xx status, keeping the status and the response text', () => {
    const { out, logs } = run(res(500, 'boom', 'text/plain'))
    for (const id of ids) expect(out[id]).toEqual({ ok: false, code: 500, errorMessage: 'Internal Server Error', response: 'boom' })
    expect(logs[0]).toMatchObject({ level: 'warn', target: 'hook', status: 500, statusText: 'Internal Server Error', events: ids })
  })

  it.each([
    ['an empty body', '', JSON_TYPE],
    ['a blank body', ' \n', JSON_TYPE],
    ['a text/plain body listing failures', '{"failures":[{"eventId":"e1"}]}', 'text/plain'],
    ['no content type', '{"failures":[{"eventId":"e1"}]}', null],
    ['JSON without failures', '{"ok":true}', JSON_TYPE],
    ['a JSON array', '[1]', JSON_TYPE],
    ['JSON null', 'null', JSON_TYPE],
    ['a JSON string', '"failures"', JSON_TYPE],
    ['an empty failures list', '{"failures":[]}', JSON_TYPE],
  ])('succeeds every event on a 2xx with %s', (_, body, type) => {
    const { out, logs } = run(res(200, body, type))
    for (const id of ids) expect(out[id]).toEqual({ ok: true, code: 200 })
    expect(logs).toEqual([])
  })

  it('succeeds on a non-JSON body over the read limit, and fails on a JSON one', () => {
    expect(run(res(200, 'x'.repeat(100), 'text/html', true)).out.e1).toEqual({ ok: true, code: 200 })
    const { out } = run(res(200, '{"failures":[' + ' '.repeat(100), JSON_TYPE, true))
    expect(out.e1).toMatchObject({ ok: false, code: 200, errorMessage: `Invalid response: body longer than ${MAX_RESPONSE_BYTES} bytes` })
  })

  it('fails only the events the target names, with their errors, and logs their ids only', () => {
    const { out, logs } = run(res(200, JSON.stringify({ failures: [{ eventId: 'e2', error: 'nope' }, { eventId: 'e3', note: 'extra keys in an entry are ignored' }] }), 'application/problem+json'))
    expect(out).toEqual({
      e1: { ok: true, code: 200 },
      e2: { ok: false, code: 200, errorMessage: 'nope' },
      e3: { ok: false, code: 200, errorMessage: 'Reported failed by the target' },
    })
    expect(logs).toHaveLength(1)
    expect(logs[0]).toMatchObject({ level: 'warn', target: 'hook', events: ['e2', 'e3'] })
    expect(JSON.stringify(logs)).not.toContain('nope')
  })

  it('fails the whole batch when the target names an unknown event id, logging only the count', () => {
    const { out, logs } = run(res(200, JSON.stringify({ failures: [{ eventId: 'e1' }, { eventId: 'someone-elses' }] })))
    for (const id of ids) expect(out[id]).toMatchObject({ ok: false, code: 200, errorMessage: 'Invalid response: undefined events IDs: someone-elses' })
    expect(logs[0]).toMatchObject({ unknownEventIds: 1 })
    expect(JSON.stringify(logs)).not.toContain('someone-elses')
  })

  it.each([
    ['a key beside failures', '{"failures":[],"ok":true}'],
    ['failures not an array', '{"failures":"e1"}'],
    ['failures null', '{"failures":null}'],
    ['an entry without eventId', '{"failures":[{"id":"e1"}]}'],
    ['a numeric eventId', '{"failures":[{"eventId":1}]}'],
    ['a non-string error', '{"failures":[{"eventId":"e1","error":5}]}'],
    ['a null error', '{"failures":[{"eventId":"e1","error":null}]}'],
    ['JSON that does not parse', '{"failures":[{"eventId":"e1"'],
  ])('fails the whole batch with "Invalid response" on %s', (_, body) => {
    const { out, logs } = run(res(200, body))
    for (const id of ids) expect(out[id]).toMatchObject({ ok: false, code: 200, errorMessage: expect.stringMatching(/^Invalid response: /), response: body })
    expect(logs[0]).toMatchObject({ level: 'warn', msg: 'Webhook target returned a malformed response' })
  })

  it('stores receiver text redacted and bounded, and logs only a short excerpt of the reason phrase', () => {
    const secret = 'tok_0123456789'
    const r = { ...res(500, `echo ${secret} ` + 'x'.repeat(10_000)), statusText: `Bad ${secret} ` + 'y'.repeat(5_000) }
    const { out, logs } = run(r, redactor([secret]))
    const o = out.e1
    expect(o?.ok).toBe(false)
    if (o?.ok !== false) return
    expect(o.response?.startsWith(`echo ${REDACTED} `)).toBe(true)
    expect(Buffer.byteLength(o.response ?? '')).toBe(4096)
    expect(o.errorMessage.startsWith(`Bad ${REDACTED} `)).toBe(true)
    expect(Buffer.byteLength(o.errorMessage)).toBe(1024)
    expect(JSON.stringify(logs)).not.toContain(secret)
    expect(JSON.stringify(logs).length).toBeLessThan(1000)
  })
})

describe('storable text', () => {
  it('cuts on a character boundary by UTF-8 bytes, never splitting an emoji', () => {
    const text = 'a' + '😀'.repeat(2000)
    const out = cleanText(text, 4096)
    expect(Buffer.byteLength(out)).toBe(1 + 4 * 1023)
    expect(out).toBe('a' + '😀'.repeat(1023))
    expect(cleanText('é'.repeat(10), 5)).toBe('éé')
  })

  it('replaces NUL and lone surrogates, keeping pairs', () => {
    expect(cleanText('a\u0000b\uD800c\uDC00d😀', 100)).toBe('a\uFFFDb\uFFFDc\uFFFDd😀')
    expect(cleanText('\uDC00\uD800', 100)).toBe('\uFFFD\uFFFD')
  })

  it('redacts every variable value, in its JSON and URL forms, before cutting; short values are left', () => {
    const redact = redactor(['s3cr"et!', 'abc', 'a long token value'])
    expect(redact('x s3cr"et! y s3cr\\"et! z s3cr%22et! w abc')).toBe(`x ${REDACTED} y ${REDACTED} z ${REDACTED} w abc`)
    expect('abc'.length).toBeLessThan(MIN_REDACTED_LENGTH)
    // A secret straddling the cut is redacted whole, not left half visible.
    expect(cleanText('xxxxxa long token value', 8, redact)).toBe('xxxxx[re')
  })
})

describe('templates', () => {
  const vars = new Map([['a', '1'], ['b_2', '2'], ['empty', '']])

  it('substitutes {{NAME}} of word characters only and leaves other braces as text', () => {
    expect(substitute('https://x/{{a}}?k={{b_2}}', vars)).toBe('https://x/1?k=2')
    expect(substitute('{{ a }} {{a.b}} {{a-b}} {a}', vars)).toBe('{{ a }} {{a.b}} {{a-b}} {a}')
  })

  it('fails on a missing or an empty variable, naming it', () => {
    expect(() => substitute('{{nope}}', vars)).toThrow(UndefinedVariableError)
    expect(() => substitute('{{nope}}', vars)).toThrow('Undefined variable nope')
    expect(() => substitute('x{{empty}}', vars)).toThrow('Undefined variable empty')
  })

  const target = (extra: Partial<WebhookTarget>): WebhookTarget => ({ type: 'webhook', name: 't', url: 'x', ...extra })
  const plain = (v: unknown) => JSON.parse(JSON.stringify(v))

  it('puts events into the object at payloadPath, creating objects on the way, inside a copy of the body', () => {
    expect(plain(requestBody(target({}), []))).toEqual({ events: [] })
    expect(plain(requestBody(target({ payloadPath: [] }), []))).toEqual({ events: [] })
    const t = target({ body: { options: 1 }, payloadPath: ['payload', 'json'] })
    expect(JSON.stringify(requestBody(t, []))).toBe('{"options":1,"payload":{"json":{"events":[]}}}')
    expect(t.body).toEqual({ options: 1 })
    expect(plain(requestBody(target({ body: { a: { b: 1 }, n: null }, payloadPath: ['a'] }), []))).toEqual({ a: { b: 1, events: [] }, n: null })
    expect(plain(requestBody(target({ body: { a: null }, payloadPath: ['a'] }), []))).toEqual({ a: { events: [] } })
  })

  it('refuses a path through a value that is not an object instead of losing the events', () => {
    expect(() => requestBody(target({ body: { a: 5 }, payloadPath: ['a'] }), [])).toThrow(PayloadPathError)
    expect(() => requestBody(target({ body: { a: [1] }, payloadPath: ['a', 'b'] }), [])).toThrow(PayloadPathError)
  })

  it('cannot reach Object.prototype whatever keys a stored schema holds', () => {
    // JSON.parse makes `__proto__` an own key, as a stored schema read from jsonb has it.
    const stored = JSON.parse('{"__proto__":{"polluted":1},"constructor":{"prototype":{}}}')
    const one = requestBody(target({ body: stored, payloadPath: ['__proto__', 'events'] }), [])
    expect(({} as Record<string, unknown>).events).toBeUndefined()
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(JSON.parse(JSON.stringify(one))).toEqual(JSON.parse('{"__proto__":{"polluted":1,"events":{"events":[]}},"constructor":{"prototype":{}}}'))
    const two = requestBody(target({ payloadPath: ['__proto__'] }), [])
    expect(JSON.stringify(two)).toBe('{"__proto__":{"events":[]}}')
    const three = requestBody(target({ payloadPath: ['constructor', 'prototype'] }), [])
    expect(JSON.stringify(three)).toBe('{"constructor":{"prototype":{"events":[]}}}')
    expect(Object.prototype).not.toHaveProperty('events')
  })
})

import { describe, expect, it } from 'vitest'
import { interpretResponse, MAX_RESPONSE_BYTES, type HttpResponse } from '../../lib/delivery/response.js'
import { createLogger } from '../../lib/log.js'
import { redactor, REDACTED } from '../../lib/text.js'

const ids = ['e1', 'e2', 'e3']
const JSON_TYPE = 'application/json; charset=utf-8'
/** `null` stands for a response without a content type. */
const res = (status: number, body = '', contentType: string | null = JSON_TYPE, truncated = false): HttpResponse => ({
  status,
  statusText: status === 500 ? 'Internal Server Error' : 'OK',
  contentType: contentType ?? undefined,
  body,
  truncated,
})
const run = (r: HttpResponse, redact?: (t: string) => string) => {
  const lines: string[] = []
  const out = interpretResponse(
    r,
    ids,
    'hook',
    createLogger('debug', l => {
      lines.push(l)
    }),
    redact,
  )
  return { out: Object.fromEntries(out), logs: lines.map(l => JSON.parse(l)) }
}

describe('interpreting a webhook response', () => {
  it('fails every event on a non-2xx status, keeping the status and the response text', () => {
    const { out, logs } = run(res(500, 'boom', 'text/plain'))
    for (const id of ids)
      expect(out[id]).toEqual({
        ok: false,
        code: 500,
        errorMessage: 'Internal Server Error',
        response: 'boom',
        kind: 'down',
        wholeBatch: true,
      })
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
    const { out, logs } = run(
      res(
        200,
        JSON.stringify({
          failures: [
            { eventId: 'e2', error: 'nope' },
            { eventId: 'e3', note: 'extra keys in an entry are ignored' },
          ],
        }),
        'application/problem+json',
      ),
    )
    expect(out).toEqual({
      e1: { ok: true, code: 200 },
      e2: { ok: false, code: 200, errorMessage: 'nope', kind: 'rejected' },
      e3: { ok: false, code: 200, errorMessage: 'Reported failed by the target', kind: 'rejected' },
    })
    expect(logs).toHaveLength(1)
    expect(logs[0]).toMatchObject({ level: 'warn', target: 'hook', events: ['e2', 'e3'] })
    expect(JSON.stringify(logs)).not.toContain('nope')
  })

  it('fails the whole batch when the target names an unknown event id, logging only the count', () => {
    const { out, logs } = run(res(200, JSON.stringify({ failures: [{ eventId: 'e1' }, { eventId: 'someone-elses' }] })))
    for (const id of ids)
      expect(out[id]).toMatchObject({ ok: false, code: 200, errorMessage: 'Invalid response: undefined events IDs: someone-elses' })
    expect(logs[0]).toMatchObject({ unknownEventIds: 1 })
    expect(JSON.stringify(logs)).not.toContain('someone-elses')
  })

  it.each([
    ['a key beside failures', '{"failures":[],"ok":true}', 'value at root: extra property ok found'],
    ['failures not an array', '{"failures":"e1"}', 'value at path /failures: must be array, "e1" given'],
    ['failures null', '{"failures":null}', 'value at path /failures: must be array, null given'],
    ['an entry that is not an object', '{"failures":["e1"]}', 'value at path /failures/0: must be object, "e1" given'],
    ['an entry without eventId', '{"failures":[{"id":"e1"}]}', 'value at path /failures/0/eventId: must be string, undefined given'],
    ['a numeric eventId', '{"failures":[{"eventId":"e1"},{"eventId":1}]}', 'value at path /failures/1/eventId: must be string, 1 given'],
    [
      'a non-string error',
      '{"failures":[{"eventId":"e1","error":{"a":[5]}}]}',
      'value at path /failures/0/error: must be string, {"a":[5]} given',
    ],
    ['a null error', '{"failures":[{"eventId":"e1","error":null}]}', 'value at path /failures/0/error: must be string, null given'],
    // Upstream checks `failures` whole before the keys beside it.
    ['a bad failures beside another key', '{"extra":1,"failures":5}', 'value at path /failures: must be array, 5 given'],
    ['JSON that does not parse', '{"failures":[{"eventId":"e1"', 'body is not valid JSON'],
  ])('fails the whole batch with upstream\'s "Invalid response: …" on %s', (_, body, problem) => {
    const { out, logs } = run(res(200, body))
    for (const id of ids)
      expect(out[id]).toMatchObject({ ok: false, code: 200, errorMessage: `Invalid response: ${problem}`, response: body })
    expect(logs[0]).toMatchObject({ level: 'warn', msg: 'Webhook target returned a malformed response' })
    // The log line names the problem's kind only: never a value the receiver sent.
    expect(JSON.stringify(logs)).not.toContain('given')
  })

  it('redacts secrets in the values it quotes, JSON-escaped as quoted, keys too, and bounds the text', () => {
    // A secret with a quote and a backslash: quoted, it is JSON-escaped.
    const secret = 'se"cr\\et_42'
    const body = JSON.stringify({ failures: [{ eventId: 'e1', error: { [secret]: secret, pad: 'z'.repeat(5000) } }] })
    const { out } = run(res(200, body), redactor([secret]))
    const o = out.e1
    if (o?.ok !== false) throw new Error('expected a failure')
    expect(
      o.errorMessage.startsWith(
        `Invalid response: value at path /failures/0/error: must be string, {"${REDACTED}":"${REDACTED}","pad":"zz`,
      ),
    ).toBe(true)
    expect(Buffer.byteLength(o.errorMessage)).toBe(1024)
    expect(o.errorMessage).not.toContain('cr\\')
    expect(o.errorMessage).not.toContain('cr\\\\')
  })

  it('says so instead of quoting a value nested too deeply to serialize', () => {
    const depth = 200_000
    const body = `{"failures":[{"eventId":"e1","error":${'['.repeat(depth)}${']'.repeat(depth)}}]}`
    // V8 parses this depth (its parser does not recurse) but cannot serialize it back.
    expect(() => JSON.stringify(JSON.parse(body))).toThrow(RangeError)
    const { out } = run(res(200, body))
    expect(out.e1).toMatchObject({
      ok: false,
      errorMessage: 'Invalid response: value at path /failures/0/error: must be string, a value nested too deeply to quote given',
    })
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

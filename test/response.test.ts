import { describe, expect, it } from 'vitest'
import { interpretResponse, type HttpResponse } from '../lib/delivery/response.js'
import { createLogger } from '../lib/log.js'
import { requestBody, substitute, UndefinedVariableError } from '../lib/delivery/template.js'

const ids = ['e1', 'e2', 'e3']
const res = (status: number, body = '', truncated = false): HttpResponse => ({ status, statusText: status === 500 ? 'Internal Server Error' : 'OK', body, truncated })
const run = (r: HttpResponse) => {
  const lines: string[] = []
  const out = interpretResponse(r, ids, 'hook', createLogger('debug', l => { lines.push(l) }))
  return { out: Object.fromEntries(out), logs: lines.map(l => JSON.parse(l)) }
}

describe('interpreting a webhook response', () => {
  it('fails every event on a non-2xx status, keeping the status and the response text', () => {
    const { out, logs } = run(res(500, 'boom'))
    for (const id of ids) expect(out[id]).toEqual({ ok: false, code: 500, errorMessage: 'Internal Server Error', response: 'boom' })
    expect(logs[0]).toMatchObject({ level: 'warn', target: 'hook', status: 500, statusText: 'Internal Server Error', events: ids })
  })

  it.each([['an empty body', ''], ['a non-JSON body', 'thanks!'], ['JSON without failures', '{"ok":true}'], ['a JSON array', '[1]'], ['an empty failures list', '{"failures":[]}']])(
    'succeeds every event on a 2xx with %s', (_, body) => {
      const { out, logs } = run(res(200, body))
      for (const id of ids) expect(out[id]).toEqual({ ok: true, code: 200 })
      expect(logs).toEqual([])
    })

  it('fails only the events the target names, with their errors, and logs their ids only', () => {
    const { out, logs } = run(res(200, JSON.stringify({ failures: [{ eventId: 'e2', error: 'nope' }, { eventId: 'e3' }] })))
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
    for (const id of ids) expect(out[id]).toMatchObject({ ok: false, code: 200, errorMessage: expect.stringMatching(/outside the batch/) })
    expect(logs[0]).toMatchObject({ unknownEventIds: 1 })
    expect(JSON.stringify(logs)).not.toContain('someone-elses')
  })

  it.each([['not an array', '{"failures":"e1"}'], ['an entry without eventId', '{"failures":[{"id":"e1"}]}'], ['a non-string error', '{"failures":[{"eventId":"e1","error":5}]}']])(
    'fails the whole batch when failures is malformed (%s)', (_, body) => {
      const { out, logs } = run(res(200, body))
      for (const id of ids) expect(out[id]).toMatchObject({ ok: false, errorMessage: expect.stringMatching(/Malformed response/) })
      expect(logs[0]).toMatchObject({ level: 'warn', msg: 'Webhook target returned a malformed response' })
    })
})

describe('templates', () => {
  it('substitutes variables and reports an undefined one by name', () => {
    expect(substitute('https://x/{{a}}?k={{ b }}', new Map([['a', '1'], ['b', '2']]))).toBe('https://x/1?k=2')
    expect(() => substitute('{{nope}}', new Map())).toThrow(UndefinedVariableError)
    expect(() => substitute('{{nope}}', new Map())).toThrow('Undefined variable nope')
  })

  it('places events at the payload path inside a deep copy of the body', () => {
    const target = { type: 'webhook' as const, name: 't', url: 'x', body: { a: { b: 1 } }, payloadPath: ['a', 'c', 'events'] }
    const body = requestBody(target, [])
    expect(body).toEqual({ a: { b: 1, c: { events: [] } } })
    expect(target.body).toEqual({ a: { b: 1 } })
  })
})

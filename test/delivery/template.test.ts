import { describe, expect, it } from 'vitest'
import { PayloadPathError, requestBody, substitute, UndefinedVariableError } from '../../lib/delivery/template.js'
import type { WebhookTarget } from '../../lib/schema/actions.js'

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

import { describe, expect, it } from 'vitest'
import { PayloadPathError, requestBodyText, substitute, UndefinedVariableError } from '../../lib/delivery/template.js'
import type { WebhookTarget } from '../../lib/schema/actions.js'

describe('templates', () => {
  const vars = new Map([
    ['a', '1'],
    ['b_2', '2'],
    ['empty', ''],
  ])

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
  /** The body of an empty batch, as sent. */
  const text = (t: WebhookTarget) => String(requestBodyText(t, []))
  const plain = (t: WebhookTarget): unknown => JSON.parse(text(t))

  it('puts events into the object at payloadPath, creating objects on the way, inside a copy of the body', () => {
    expect(plain(target({}))).toEqual({ events: [] })
    expect(plain(target({ payloadPath: [] }))).toEqual({ events: [] })
    const t = target({ body: { options: 1 }, payloadPath: ['payload', 'json'] })
    expect(text(t)).toBe('{"options":1,"payload":{"json":{"events":[]}}}')
    expect(t.body).toEqual({ options: 1 })
    expect(plain(target({ body: { a: { b: 1 }, n: null }, payloadPath: ['a'] }))).toEqual({ a: { b: 1, events: [] }, n: null })
    expect(plain(target({ body: { a: null }, payloadPath: ['a'] }))).toEqual({ a: { events: [] } })
  })

  it('refuses a path through a value that is not an object instead of losing the events', () => {
    expect(() => text(target({ body: { a: 5 }, payloadPath: ['a'] }))).toThrow(PayloadPathError)
    expect(() => text(target({ body: { a: [1] }, payloadPath: ['a', 'b'] }))).toThrow(PayloadPathError)
  })

  it('cannot reach Object.prototype whatever keys a stored schema holds', () => {
    // JSON.parse makes `__proto__` an own key, as a stored schema read from jsonb has it.
    const stored = JSON.parse('{"__proto__":{"polluted":1},"constructor":{"prototype":{}}}')
    const one = text(target({ body: stored, payloadPath: ['__proto__', 'events'] }))
    expect(({} as Record<string, unknown>).events).toBeUndefined()
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(JSON.parse(one)).toEqual(JSON.parse('{"__proto__":{"polluted":1,"events":{"events":[]}},"constructor":{"prototype":{}}}'))
    expect(text(target({ payloadPath: ['__proto__'] }))).toBe('{"__proto__":{"events":[]}}')
    expect(text(target({ payloadPath: ['constructor', 'prototype'] }))).toBe('{"constructor":{"prototype":{"events":[]}}}')
    expect(Object.prototype).not.toHaveProperty('events')
  })
})

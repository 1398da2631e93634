import { describe, expect, it } from 'vitest'
import { EnqueueValidationError } from '../lib/enqueue/errors.js'
import { ConfigError, describeError, formatError, ValidationError } from '../lib/errors.js'
import { createLogger } from '../lib/log.js'
import { SchemaValidationError } from '../lib/schema/actions.js'

describe('the validation error', () => {
  it('is one class under the three names callers catch, each keeping its own name and problems', () => {
    const errors = [
      new ConfigError(['A: required']),
      new SchemaValidationError(['targets.t.url: bad']),
      new EnqueueValidationError(['events.0.id: bad']),
    ]
    expect(errors.map(e => e instanceof ValidationError)).toEqual([true, true, true])
    expect(errors.map(e => e.name)).toEqual(['ConfigError', 'SchemaValidationError', 'EnqueueValidationError'])
    expect(errors.map(e => e.message.split('\n')[0])).toEqual([
      'Invalid configuration:',
      'Invalid actions schema:',
      'Invalid enqueue request:',
    ])
    expect(errors[1]?.problems).toEqual(['targets.t.url: bad'])
    expect(errors[0]).not.toBeInstanceOf(SchemaValidationError)
  })
})

describe('the safe error describer', () => {
  const secret = 'https://user:hunter2@hooks.example/secret'
  const socket = Object.assign(new Error(`connect ECONNREFUSED ${secret}`), { code: 'ECONNREFUSED' })
  const error = new Error('delivery failed', { cause: new TypeError(`fetch failed for ${secret}`, { cause: socket }) })

  it('tells the top message and the causes by name and code only', () => {
    expect(describeError(error)).toEqual({
      name: 'Error',
      message: 'delivery failed',
      cause: { name: 'TypeError', cause: { name: 'Error', code: 'ECONNREFUSED' } },
    })
    expect(formatError(error)).toBe('Error: delivery failed (cause: TypeError ← Error ECONNREFUSED)')
  })

  it('keeps cause messages out of log lines', () => {
    const lines: string[] = []
    createLogger('info', line => lines.push(line)).error('Delivery failed', { error })
    expect(lines).toHaveLength(1)
    expect(lines[0]).not.toContain('hunter2')
    expect(JSON.parse(lines[0] ?? '{}').error.cause.cause.code).toBe('ECONNREFUSED')
  })

  it('stops at a cyclic cause chain', () => {
    const a: Error = new Error('a')
    a.cause = a
    expect(formatError(a)).toBe('Error: a (cause: Error ← Error ← Error)')
  })

  it('does not quote a thrown non-error', () => {
    expect(formatError(secret)).not.toContain('hunter2')
  })
})

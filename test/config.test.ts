import { describe, expect, it } from 'vitest'
import { loadConfig } from '../lib/config.js'
import { ConfigError } from '../lib/errors.js'

describe('config', () => {
  it('lists every problem at once and never echoes a value', () => {
    const err = (() => {
      try {
        loadConfig({ DATABASE_URL: 'not a url with secret-pw', DISPATCH_CONCURRENCY: 'lots', CLOUDWATCH_METRICS: 'maybe' })
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(ConfigError)
    const msg = String(err)
    expect(msg).toContain('DATABASE_URL: expected a URL')
    expect(msg).toContain('SIGNAL_QUEUE_URL: ')
    expect(msg).toContain('DISPATCH_CONCURRENCY: expected a positive integer')
    expect(msg).toContain('CLOUDWATCH_METRICS: expected true or false')
    expect(msg).not.toContain('secret-pw')
  })

  it('applies defaults', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://localhost/x', SIGNAL_QUEUE_URL: 'http://localhost:1/q' })
    expect(c).toMatchObject({ DISPATCH_CONCURRENCY: 8, CLOUDWATCH_METRICS: false })
    expect(c.PUSHGATEWAY_URL).toBeUndefined()
  })
})

import { describe, expect, it } from 'vitest'
import { ValidationError } from '../../lib/errors.js'
import { MAX_RELAY_SOURCES, parseRelaySources } from '../../lib/relay/sources.js'

describe('relay sources', () => {
  it('names the project after the database, or as given before =', () => {
    expect(parseRelaySources(['postgres://u:pw@db:5432/blog', 'shop=postgresql://u:pw@db/shop_db'])).toEqual([
      { project: 'blog', url: 'postgres://u:pw@db:5432/blog' },
      { project: 'shop', url: 'postgresql://u:pw@db/shop_db' },
    ])
  })

  it('takes as many databases as the bound and refuses one more', () => {
    const urls = (n: number) => Array.from({ length: n }, (_, i) => `postgres://h/p${i}`)
    expect(parseRelaySources(urls(MAX_RELAY_SOURCES))).toHaveLength(MAX_RELAY_SOURCES)
    expect(() => parseRelaySources(urls(MAX_RELAY_SOURCES + 1))).toThrow(
      `${MAX_RELAY_SOURCES + 1} Contember databases, expected at most ${MAX_RELAY_SOURCES}`,
    )
  })

  it('refuses bad entries by position, never quoting them (a URL may hold a password)', () => {
    let error: unknown
    try {
      parseRelaySources([
        'mysql://u:secret-pw@h/x',
        'not a url secret-pw',
        'postgres://u:secret-pw@h/',
        'postgres://h/a',
        'postgres://h2/a',
      ])
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ValidationError)
    const message = error instanceof Error ? error.message : ''
    expect(message).toContain('source 1: expected a postgres:// URL')
    expect(message).toContain('source 2: expected postgres://')
    expect(message).toContain('source 3: the URL names no database')
    expect(message).toContain('source 5: project a is given twice')
    expect(message).not.toContain('secret-pw')
  })

  it('refuses an empty list', () => {
    expect(() => parseRelaySources([])).toThrow('no Contember database given')
  })
})

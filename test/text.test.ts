import { describe, expect, it } from 'vitest'
import { cleanText, MIN_REDACTED_LENGTH, redactor, REDACTED } from '../lib/text.js'

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

import { describe, expect, it } from 'vitest'
import { cleanText, MAX_REDACTION_WORK, MIN_REDACTED_LENGTH, redactor, REDACTED, WITHHELD } from '../lib/text.js'

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

  it('redacts a value whose URL-encoded form is far past what one regular expression may hold', () => {
    // 16,000 × € is 144,000 characters URL-encoded: a pattern built from it was refused by the engine.
    const long = '€'.repeat(16_000)
    const other = 'an-ordinary-token-4f1c'
    const redact = redactor([long, other])
    const text = `echo ${encodeURIComponent(long)} and ${long} and ${other}`
    expect(redact(text)).toBe(`echo ${REDACTED} and ${REDACTED} and ${REDACTED}`)
    expect(cleanText(`x${long}`, 100, redact)).toBe(`x${REDACTED}`)
  })

  it('matches values as literal text, never as a pattern', () => {
    const redact = redactor(['a.*b(', '[^x]+$'])
    expect(redact('aXXb( a.*b( [^x]+$ zzz')).toBe(`aXXb( ${REDACTED} ${REDACTED} zzz`)
  })

  it('keeps a thousand long values within its bound and redacts each', () => {
    const values = Array.from({ length: 1000 }, (_, i) => `https://hooks.example/${i}/${'k'.repeat(16_000)}`)
    const redact = redactor(values)
    const text = `a ${values[999]} b ${values[0]} c https://hooks.example/none`
    expect(redact(text)).toBe(`a ${REDACTED} b ${REDACTED} c https://hooks.example/none`)
  })

  it('withholds a text whose redaction would compare more than MAX_REDACTION_WORK characters, and redacts one just within', () => {
    // One needle longer than the text, sharing its head with every fourth position: the work is
    // the sum over those positions of what is left of the text, 4k + 4(k-1) + … + 4 = 2k(k+1).
    const within = 5792
    expect(2 * within * (within + 1)).toBeLessThanOrEqual(MAX_REDACTION_WORK)
    expect(2 * (within + 1) * (within + 2)).toBeGreaterThan(MAX_REDACTION_WORK)
    const needle = 'abcd' + 'x'.repeat(4 * (within + 1))
    const redact = redactor([needle])
    expect(redact('abcd'.repeat(within))).toBe('abcd'.repeat(within))
    expect(redact('abcd'.repeat(within + 1))).toBe(WITHHELD)
  })

  it('stops a prefix where a secret may run past its end, and stops at what it was asked to keep', () => {
    const redact = redactor(['secret-value-1234'])
    expect(redact('error: secret-val', { prefix: true })).toBe('error: ')
    expect(redact('error: sec', { prefix: true })).toBe('error: ')
    expect(redact('error: secret-val')).toBe('error: secret-val')
    expect(redact('ab secret-value-1234 cd', { keep: 5 })).toBe(`ab ${REDACTED.slice(0, 2)}`)
    expect(redact('abcdef', { keep: 3 })).toBe('abc')
  })

  it('never shows a half-redacted secret after earlier secrets shrank the text', () => {
    const long = 'L'.repeat(60)
    const tail = 'T-secret-' + 't'.repeat(40)
    const redact = redactor([long, tail])
    // Two long secrets shrink to 20 characters; the tail secret behind them is still whole and redacted.
    const text = `${long}${long}${'.'.repeat(30)}${tail}`
    expect(cleanText(text, 80, redact)).toBe(`${REDACTED}${REDACTED}${'.'.repeat(30)}${REDACTED}`.slice(0, 80))
    expect(cleanText(text, 80, redact)).not.toContain('T-secret')
  })
})

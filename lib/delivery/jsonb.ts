// Postgres writes `jsonb` as text in one fixed form: `{"a": 1, "b": [2, 3]}`, keys already in the
// order JSON.parse keeps them (by length, then bytes), strings escaped as JSON.stringify escapes them.
// What differs from JSON.stringify of the parsed value is the space after `:` and `,`, and numbers
// (jsonb keeps `numeric` digits: `1.0`, `1000000000000000000000` where JS writes `1`, `1e+21`).
// Exists for speed: against JSON.parse + JSON.stringify, 1.6 µs less dispatcher CPU per event in
// `actions-b50` (of ~18; interleaved A/B on the bundle; bench/README.md, "Code that exists for speed"), and 7 against 130 µs for a 40 KB payload.

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const COMMA = 0x2c
const OPEN_OBJECT = 0x7b
const OPEN_ARRAY = 0x5b
const CLOSE_OBJECT = 0x7d
const CLOSE_ARRAY = 0x5d
const MINUS = 0x2d
const ZERO = 0x30
const NINE = 0x39
/** Integers up to this many characters are written alike by numeric and JS (below 2^53, no exponent). */
const PLAIN_INTEGER_CHARS = 15

const isDigit = (c: number) => c >= ZERO && c <= NINE

/**
 * The bytes `JSON.stringify(JSON.parse(text))` gives for `jsonb` text output, without building the
 * value; undefined when the payload must go through the object path to keep the wire as upstream has it
 * (`{ meta, ...payload }`): a top-level `meta` key (it overrides ours in place), or any key starting with
 * a digit (JS objects order integer-like keys first, which the text form does not).
 */
export function compactJsonb(text: string): string | undefined {
  let out = ''
  let copied = 0
  let depth = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = stringEnd(text, i)
      if (end < 0 || !keepsKeyOrder(text, i, end, depth)) return undefined
      i = end
    } else if (c === COLON || c === COMMA) {
      out += text.slice(copied, i + 1)
      // jsonb puts exactly one space after each.
      if (text.charCodeAt(i + 1) === 0x20) i++
      copied = i + 1
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth++
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--
    } else if (c === MINUS || isDigit(c)) {
      const end = numberEnd(text, i)
      if (end - i > PLAIN_INTEGER_CHARS || !isDigits(text, i + 1, end)) {
        out += text.slice(copied, i) + jsNumber(text.slice(i, end))
        copied = end
      }
      i = end - 1
    }
  }
  return out + text.slice(copied)
}

/** The index of the quote closing the string that opens at `start`; -1 when it never closes. */
function stringEnd(text: string, start: number): number {
  let end = start + 1
  for (;;) {
    end = text.indexOf('"', end)
    if (end < 0) return -1
    let k = end - 1
    while (text.charCodeAt(k) === BACKSLASH) k--
    // An even run of backslashes before the quote escapes only itself: the string ends here.
    if ((end - 1 - k) % 2 === 0) return end
    end++
  }
}

/** False for a key the object path would reorder or that would override our `meta`. */
function keepsKeyOrder(text: string, start: number, end: number, depth: number): boolean {
  if (text.charCodeAt(end + 1) !== COLON) return true
  if (isDigit(text.charCodeAt(start + 1))) return false
  return !(depth === 1 && end - start === 5 && text.startsWith('meta', start + 1))
}

/** Where the number starting at `start` ends (jsonb writes numbers as JSON does, so no further check). */
function numberEnd(text: string, start: number): number {
  let end = start + 1
  while (end < text.length && isNumberChar(text.charCodeAt(end))) end++
  return end
}

// `.`, `e`, `E`, `+`, `-`: a number's characters besides its digits.
const isNumberChar = (c: number) => isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === MINUS

/** Whether text[from, to) is digits only: with its sign (the first character, skipped) an integer JS writes alike. */
function isDigits(text: string, from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (!isDigit(text.charCodeAt(k))) return false
  return true
}

/** What JSON.stringify writes for the double JSON.parse reads; numeric beyond its range becomes null. */
function jsNumber(digits: string): string {
  const value = Number(digits)
  return Number.isFinite(value) ? String(value) : 'null'
}

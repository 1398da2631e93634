// Postgres writes `jsonb` as text in one fixed form: `{"a": 1, "b": [2, 3]}`, keys already in the
// order JSON.parse keeps them (by length, then bytes), strings escaped as JSON.stringify escapes them.
// What differs from JSON.stringify of the parsed value is the space after `:` and `,`, and numbers
// (jsonb keeps `numeric` digits: `1.0`, `1000000000000000000000` where JS writes `1`, `1e+21`).

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
      let end = i + 1
      for (;;) {
        end = text.indexOf('"', end)
        if (end < 0) return undefined
        let k = end - 1
        while (text.charCodeAt(k) === BACKSLASH) k--
        // An even run of backslashes before the quote escapes only itself: the string ends here.
        if ((end - 1 - k) % 2 === 0) break
        end++
      }
      if (text.charCodeAt(end + 1) === COLON) {
        if (isDigit(text.charCodeAt(i + 1))) return undefined
        if (depth === 1 && end - i === 5 && text.startsWith('meta', i + 1)) return undefined
      }
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
      let end = i + 1
      let integer = true
      for (; end < n; end++) {
        const d = text.charCodeAt(end)
        if (isDigit(d)) continue
        // `.`, `e`, `E`, `+`, `-`: the rest of a number's characters.
        if (d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === MINUS) integer = false
        else break
      }
      if (!integer || end - i > PLAIN_INTEGER_CHARS) {
        const value = Number(text.slice(i, end))
        // What JSON.stringify writes for the double JSON.parse reads; numeric beyond its range becomes null.
        out += text.slice(copied, i) + (Number.isFinite(value) ? String(value) : 'null')
        copied = end
      }
      i = end - 1
    }
  }
  return out + text.slice(copied)
}

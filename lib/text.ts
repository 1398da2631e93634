// Text that came from a receiver (response bodies, reason phrases, `failures[].error`) is hostile: it
// may hold NUL, lone surrogates, megabytes, or our own secrets echoed back. Everything that is stored
// or logged passes through here first (docs/delivery.md).

/** Bytes of a response body kept in an event's log (docs/delivery.md): enough to read an error page's gist. */
export const STORED_RESPONSE_BYTES = 4 * 1024

/** Bytes of an error message kept in an event's log (docs/delivery.md). */
export const STORED_ERROR_BYTES = 1024

/** Bytes of receiver text a log line may quote: a hint for the operator, never a payload in the log stream. */
export const LOGGED_EXCERPT_BYTES = 200

/**
 * Variable values shorter than this are not redacted. Replacing every `1`, `en` or `v2` in a text would
 * wreck it and, worse, reveal the value by where the replacements fall; a value that short is no
 * secret anyway (it can be guessed), so it is a path part or a flag, not a credential.
 */
export const MIN_REDACTED_LENGTH = 4

/** What a variable value is replaced with in stored and logged text. */
export const REDACTED = '[redacted]'

/** Replaces secrets in a text; built once per drain from the project's variables. */
export type Redactor = (text: string) => string

/** A redactor that changes nothing (text that cannot hold a secret, or tests). */
export const noRedaction: Redactor = text => text

/**
 * A redactor for every value (at least {@link MIN_REDACTED_LENGTH} characters) in `values`, also in the
 * JSON-escaped and URL-encoded forms an echoing receiver is likely to send back. Longer values are
 * matched first, so a value containing another is redacted whole.
 */
export function redactor(values: Iterable<string>): Redactor {
  const needles = new Set<string>()
  for (const value of values) {
    if (value.length < MIN_REDACTED_LENGTH) continue
    needles.add(value)
    needles.add(JSON.stringify(value).slice(1, -1))
    try {
      needles.add(encodeURIComponent(value))
    } catch {
      // A value with a lone surrogate has no URL-encoded form; the plain one is still redacted.
    }
  }
  if (needles.size === 0) return noRedaction
  const pattern = new RegExp(
    [...needles]
      .sort((a, b) => b.length - a.length)
      .map(escapeRegExp)
      .join('|'),
    'g',
  )
  return text => text.replace(pattern, REDACTED)
}

/**
 * Makes receiver text safe to store: secrets redacted (before cutting, so no half of a secret
 * survives), NUL and lone surrogates replaced by U+FFFD (Postgres rejects both in jsonb), and cut to
 * at most `maxBytes` UTF-8 bytes on a character boundary.
 */
export function cleanText(text: string, maxBytes: number, redact: Redactor = noRedaction): string {
  // One more UTF-16 unit than bytes is always enough: every unit kept costs at least one byte, and the
  // extra unit keeps a surrogate pair that straddles the cut whole until the byte cut drops it.
  const head = redact(text).slice(0, maxBytes + 1)
  return cutUtf8(head.replace(UNSTORABLE, '\uFFFD'), maxBytes)
}

/** A bounded, redacted excerpt of receiver text for a log line. */
export function excerpt(text: string, redact: Redactor = noRedaction): string {
  return cleanText(text, LOGGED_EXCERPT_BYTES, redact)
}

/** NUL, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/** The longest prefix of a well-formed string that fits in `maxBytes` UTF-8 bytes. */
function cutUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text
  let bytes = 0
  let i = 0
  while (i < text.length) {
    const cp = text.codePointAt(i) ?? 0
    const size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4
    if (bytes + size > maxBytes) break
    bytes += size
    i += cp >= 0x10000 ? 2 : 1
  }
  return text.slice(0, i)
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

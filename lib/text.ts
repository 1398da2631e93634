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

/**
 * What a redaction may be told about the text it gets: `keep` asks for at most that many UTF-16 units
 * of the redacted text (the scan stops there, so a long text costs no more than its kept part);
 * `prefix` says the text is the start of a longer one (a listing fetches only the start of an error),
 * so the scan stops where a secret could run past its end instead of showing half of it.
 */
export type RedactOptions = { keep?: number; prefix?: boolean }

/** Replaces secrets in a text; built once per drain (or per answer) from the project's secrets. */
export type Redactor = (text: string, opts?: RedactOptions) => string

/** A redactor that changes nothing (text that cannot hold a secret, or tests). */
export const noRedaction: Redactor = (text, opts) => (opts?.keep === undefined ? text : text.slice(0, opts.keep))

/**
 * Characters a redaction may compare, at most, for one text. Each position of the text is compared
 * only with the secrets that share its first {@link MIN_REDACTED_LENGTH} characters, so the work is
 * near the text's length; only a text crafted against many long secrets with one common start comes
 * near this bound (64 Mi comparisons take well under a second). Past it the text is withheld whole.
 */
export const MAX_REDACTION_WORK = 64 * 1024 * 1024

/**
 * What a text becomes when it cannot be redacted within {@link MAX_REDACTION_WORK}, or redaction
 * failed: nothing of it is kept, so nothing of a secret can leak through a half-done redaction.
 */
export const WITHHELD = '[withheld: the text could not be redacted]'

/**
 * A redactor for every value (at least {@link MIN_REDACTED_LENGTH} characters) in `values`, also in the
 * JSON-escaped and URL-encoded forms an echoing receiver is likely to send back. The values are matched
 * as literal strings (never compiled into a pattern, whose size the engine bounds), longer values
 * first, so a value containing another is redacted whole. It never throws: a text it cannot redact
 * within its bound becomes {@link WITHHELD}.
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
  // Needles by their first characters, each list longest first.
  const byHead = new Map<string, string[]>()
  for (const needle of [...needles].sort((a, b) => b.length - a.length)) {
    const head = needle.slice(0, MIN_REDACTED_LENGTH)
    const list = byHead.get(head)
    if (list) list.push(needle)
    else byHead.set(head, [needle])
  }
  return (text, opts = {}) => {
    try {
      return replaceNeedles(text, byHead, opts)
    } catch {
      // Not expected (the scan only compares strings); whatever it was, it must not show the text.
      return WITHHELD
    }
  }
}

/** The leftmost-longest literal replacement of `byHead`'s needles in `text`, within the work bound. */
function replaceNeedles(
  text: string,
  byHead: ReadonlyMap<string, readonly string[]>,
  { keep = Infinity, prefix = false }: RedactOptions,
): string {
  const parts: string[] = []
  let kept = 0
  let from = 0
  let work = 0
  let i = 0
  const emitUpTo = (end: number) => {
    if (end > from) {
      const piece = text.slice(from, Math.min(end, from + (keep - kept)))
      parts.push(piece)
      kept += piece.length
    }
  }
  scan: while (i < text.length && kept + (i - from) < keep) {
    const candidates = byHead.get(text.slice(i, i + MIN_REDACTED_LENGTH))
    if (candidates === undefined) {
      // In a prefix, the last few characters may start a secret whose head was cut off.
      if (prefix && i + MIN_REDACTED_LENGTH > text.length) break
      i++
      continue
    }
    for (const needle of candidates) {
      work += Math.min(needle.length, text.length - i)
      if (work > MAX_REDACTION_WORK) return WITHHELD
      if (text.startsWith(needle, i)) {
        emitUpTo(i)
        parts.push(REDACTED)
        kept += REDACTED.length
        i += needle.length
        from = i
        continue scan
      }
      // The text ends inside what may be this secret: in a prefix, stop before it.
      if (prefix && i + needle.length > text.length && needle.startsWith(text.slice(i))) break scan
    }
    i++
  }
  emitUpTo(i)
  const out = parts.join('')
  return out.length > keep ? out.slice(0, keep) : out
}

/**
 * Makes receiver text safe to store: secrets redacted (before cutting, so no half of a secret
 * survives), NUL and lone surrogates replaced by U+FFFD (Postgres rejects both in jsonb), and cut to
 * at most `maxBytes` UTF-8 bytes on a character boundary.
 */
export function cleanText(text: string, maxBytes: number, redact: Redactor = noRedaction): string {
  // One more UTF-16 unit than bytes is always enough: every unit kept costs at least one byte, and the
  // extra unit keeps a surrogate pair that straddles the cut whole until the byte cut drops it.
  const head = redact(text, { keep: maxBytes + 1 })
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

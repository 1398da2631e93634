import type { Outcome, RetryAfter } from '../events.js'
import { statusKind } from '../kinds.js'
import type { Logger } from '../log.js'
import { cleanText, excerpt, noRedaction, STORED_ERROR_BYTES, STORED_RESPONSE_BYTES, type Redactor } from '../text.js'

// Statuses whose Retry-After is honoured (RFC 9110 §10.2.3: 503; RFC 6585 §4: 429).
const RETRY_AFTER_STATUSES = new Set([429, 503])
/**
 * Longest Retry-After value read, in characters: an HTTP date is 29, and more digits than this are
 * already beyond any cap (the record statement caps the delay at RETRY_AFTER_MAX_MS).
 */
const MAX_RETRY_AFTER_CHARS = 40
// Delta-seconds past this (about 31 years) are taken as this; the cap applies later anyway.
const MAX_RETRY_AFTER_SECONDS = 1e9

/**
 * Response bytes read at most, counted after content decoding (so a small compressed body cannot
 * expand past it); the rest is discarded unread (a target can answer with anything). A JSON answer
 * longer than this cannot be judged, so it is an invalid response (docs/delivery.md).
 */
export const MAX_RESPONSE_BYTES = 1024 * 1024

/** Why a body could not be read as text: a content coding we do not decode, or a stream that does not decode. */
export type Undecodable = 'unsupported content encoding' | 'body could not be decoded'

/** A completed HTTP exchange, body already read up to the read limit. */
export type HttpResponse = {
  status: number
  /** The reason phrase as the receiver sent it (receiver text). */
  statusText: string
  /** The `content-type` header, several joined with `, `, as fetch's `Headers.get` does. */
  contentType: string | undefined
  /** The body as fetch's `.text()` reads it: content codings decoded, UTF-8, one leading BOM stripped. */
  body: string
  /** The (decoded) body was longer than {@link MAX_RESPONSE_BYTES} and was cut there. */
  truncated: boolean
  /** A non-empty body that could not be decoded, and why (our words); `body` is then empty. */
  undecodable?: Undecodable
  /** The `retry-after` header as sent, if any. */
  retryAfter?: string
}

/**
 * Interprets a webhook response for a batch with upstream's rules (docs/delivery.md): every event
 * gets an outcome. Receiver text in outcomes is redacted and bounded for storage; warnings name the
 * target and event ids, and quote receiver text only as a short redacted excerpt.
 */
export function interpretResponse(
  res: HttpResponse,
  eventIds: readonly string[],
  target: string,
  log: Logger,
  redact: Redactor = noRedaction,
): Map<string, Outcome> {
  const r: Reading = { res, eventIds, target, log, redact }
  if (res.status < 200 || res.status >= 300) return statusOutcomes(r)
  // Upstream: an empty body, or one whose content type does not mention JSON, means all delivered.
  // Only a JSON body has to be read, so only then does a body that cannot be decoded fail the attempt.
  const isJson = res.contentType?.toLowerCase().includes('json') ?? false
  if (!isJson || (!res.truncated && !res.undecodable && res.body.trim() === '')) return all(r, { ok: true, code: res.status })
  if (res.undecodable) return invalid(r, res.undecodable)
  if (res.truncated) return invalid(r, `body longer than ${MAX_RESPONSE_BYTES} bytes`)
  let parsed: unknown
  try {
    parsed = JSON.parse(res.body)
  } catch {
    // Our own words: the parser's message quotes the body.
    return invalid(r, 'body is not valid JSON')
  }
  // JSON that is not an object, or an object without `failures`, means all delivered.
  if (typeof parsed !== 'object' || parsed === null || !('failures' in parsed)) return all(r, { ok: true, code: res.status })
  const failures = parseFailures(parsed)
  if (typeof failures === 'string') return invalid(r, failures)
  const inBatch = new Set(eventIds)
  const outside = [...failures.keys()].filter(id => !inBatch.has(id))
  if (outside.length) return outsideBatch(r, outside)
  return reportedOutcomes(res.status, eventIds, failures, target, log, redact)
}

/** One response being read: what every outcome of {@link interpretResponse} is made from. */
type Reading = { res: HttpResponse; eventIds: readonly string[]; target: string; log: Logger; redact: Redactor }

/** The same outcome for every event of the batch; a failure then says it was the whole batch's. */
function all({ eventIds }: Reading, o: Outcome): Map<string, Outcome> {
  const outcome: Outcome = o.ok ? o : { ...o, wholeBatch: true }
  return new Map(eventIds.map(id => [id, outcome]))
}

const stored = ({ res, redact }: Reading) => cleanText(res.body, STORED_RESPONSE_BYTES, redact)

function invalid(r: Reading, problem: string): Map<string, Outcome> {
  r.log.warn('Webhook target returned a malformed response', { target: r.target, status: r.res.status, events: r.eventIds })
  // The receiver answered 2xx: it works, and this answer rejects the batch.
  // The problem may quote the receiver's values (upstream's validator texts): stored bounded and redacted.
  const errorMessage = cleanText(`Invalid response: ${problem}`, STORED_ERROR_BYTES, r.redact)
  return all(r, { ok: false, code: r.res.status, errorMessage, response: stored(r), kind: 'rejected' })
}

/** A status outside 2xx fails the whole batch, with the kind its status says and a Retry-After where one counts. */
function statusOutcomes(r: Reading): Map<string, Outcome> {
  const { res, redact } = r
  r.log.warn('Webhook target responded with an error status', {
    target: r.target,
    status: res.status,
    statusText: excerpt(res.statusText, redact),
    events: r.eventIds,
  })
  const retryAfter = RETRY_AFTER_STATUSES.has(res.status) ? parseRetryAfter(res.retryAfter) : undefined
  return all(r, {
    ok: false,
    code: res.status,
    errorMessage: cleanText(res.statusText, STORED_ERROR_BYTES, redact),
    response: stored(r),
    kind: statusKind(res.status),
    ...(retryAfter ? { retryAfter } : {}),
  })
}

/** `failures` naming events outside the batch reject the whole batch, as upstream does. */
function outsideBatch(r: Reading, outside: readonly string[]): Map<string, Outcome> {
  r.log.warn('Webhook target reported failures for event ids outside the batch', {
    target: r.target,
    status: r.res.status,
    unknownEventIds: outside.length,
    events: r.eventIds,
  })
  // Upstream's text; the ids are the receiver's, so they are stored redacted and bounded, never logged.
  return all(r, {
    ok: false,
    code: r.res.status,
    errorMessage: cleanText(`Invalid response: undefined events IDs: ${outside.join('; ')}`, STORED_ERROR_BYTES, r.redact),
    response: stored(r),
    kind: 'rejected',
  })
}

type Failure = { error: string | undefined; retry: boolean | undefined }

/** Each event's outcome once the receiver's `failures` name only events of the batch: failed as reported, else delivered. */
function reportedOutcomes(
  status: number,
  eventIds: readonly string[],
  failures: ReadonlyMap<string, Failure>,
  target: string,
  log: Logger,
  redact: Redactor,
): Map<string, Outcome> {
  const failedIds = eventIds.filter(id => failures.has(id))
  if (failedIds.length) log.warn('Webhook target reported failed events', { target, status, events: failedIds })
  return new Map(
    eventIds.map((id): [string, Outcome] => {
      const failure = failures.get(id)
      if (!failure) return [id, { ok: true, code: status }]
      const { error, retry } = failure
      return [
        id,
        {
          ok: false,
          code: status,
          errorMessage: error === undefined ? 'Reported failed by the target' : cleanText(error, STORED_ERROR_BYTES, redact),
          // `"retry": false` (an extension; upstream receivers never send it): the event fails at once.
          kind: retry === false ? 'final' : 'rejected',
        },
      ]
    }),
  )
}

/**
 * Upstream's shape: exactly `{ failures: [{ eventId: string, error?: string }] }` at the top (no other
 * key); entries may carry other keys, which upstream ignores. Returns the errors by event id, or what
 * is wrong in upstream's words (its validator's: `value at path /failures/0/eventId: must be string, 7
 * given`, `value at root: extra property ok found`), checked in its order: `failures` whole first,
 * then the keys beside it. The values quoted are the receiver's: the caller redacts and bounds the text.
 */
function parseFailures(parsed: object): Map<string, Failure> | string {
  const value: unknown = Reflect.get(parsed, 'failures')
  if (!Array.isArray(value)) return mustBe(['failures'], 'array', value)
  const out = new Map<string, Failure>()
  for (const [i, item] of value.entries()) {
    if (typeof item !== 'object' || item === null) return mustBe(['failures', i], 'object', item)
    const eventId: unknown = Reflect.get(item, 'eventId')
    const error: unknown = Reflect.get(item, 'error')
    if (typeof eventId !== 'string') return mustBe(['failures', i, 'eventId'], 'string', eventId)
    if (error !== undefined && typeof error !== 'string') return mustBe(['failures', i, 'error'], 'string', error)
    // Other keys are ignored, as upstream ignores them; `retry` is read only when it is a boolean.
    const retry: unknown = Reflect.get(item, 'retry')
    out.set(eventId, { error, retry: typeof retry === 'boolean' ? retry : undefined })
  }
  const extra = Object.keys(parsed).find(k => k !== 'failures')
  if (extra !== undefined) return `value at root: extra property ${extra} found`
  return out
}

/** Upstream's text for a value of the wrong type at `path`. */
const mustBe = (path: ReadonlyArray<string | number>, expected: string, value: unknown) =>
  `value at path /${path.join('/')}: must be ${expected}, ${given(value)} given`

/**
 * A receiver's value quoted as upstream quotes it: its JSON (`undefined` for a missing one). The value
 * comes from a body of at most MAX_RESPONSE_BYTES, so its JSON is bounded too; the caller redacts the
 * text (JSON-escaped secrets included) and cuts it. One nested too deeply to serialize is not quoted.
 */
function given(value: unknown): string {
  try {
    const text: unknown = JSON.stringify(value)
    return typeof text === 'string' ? text : 'undefined'
  } catch {
    return 'a value nested too deeply to quote'
  }
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
// RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must accept.
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/
const RFC850 = /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/
const ASCTIME = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/

/**
 * Reads `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP date. Anything else, an impossible
 * date included, is ignored (undefined): a receiver's malformed header must not change the schedule.
 */
export function parseRetryAfter(value: string | undefined): RetryAfter | undefined {
  if (value === undefined) return undefined
  const v = value.trim()
  if (v.length === 0 || v.length > MAX_RETRY_AFTER_CHARS) return undefined
  if (/^\d+$/.test(v)) return { delayMs: Math.min(Number(v), MAX_RETRY_AFTER_SECONDS) * 1000 }
  let m = IMF_FIXDATE.exec(v)
  if (m) return httpDate(m[3], m[2], m[1], m[4], m[5], m[6])
  m = RFC850.exec(v)
  // RFC 9110: a two-digit year more than 50 years in the future is in the past century; 2000+ is the reading here.
  if (m) return httpDate(`20${m[3]}`, m[2], m[1], m[4], m[5], m[6])
  m = ASCTIME.exec(v)
  if (m) return httpDate(m[6], m[1], m[2], m[3], m[4], m[5])
  return undefined
}

function httpDate(...parts: Array<string | undefined>): RetryAfter | undefined {
  const [year, month, day, hour, minute, second] = parts
  const mon = MONTHS.indexOf(month ?? '')
  const [y, d, h, mi, s] = [year, day, hour, minute, second].map(p => Number(p?.trim()))
  if (mon < 0 || y === undefined || d === undefined || h === undefined || mi === undefined || s === undefined) return undefined
  const at = new Date(Date.UTC(y, mon, d, h, mi, s))
  // Date.UTC rolls 31 Feb over into March: such a date is malformed, not a different day.
  if (
    Number.isNaN(at.getTime()) ||
    at.getUTCDate() !== d ||
    at.getUTCHours() !== h ||
    at.getUTCMinutes() !== mi ||
    at.getUTCSeconds() !== s
  )
    return undefined
  return { at }
}

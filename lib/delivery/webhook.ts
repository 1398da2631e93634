import { STATUS_CODES } from 'node:http'
import { pipeline, Transform, type Readable } from 'node:stream'
import zlib from 'node:zlib'
import type { Dispatcher } from 'undici'
import { errorCode } from '../errors.js'
import type { ClaimedEvent, FailureKind } from '../events.js'
import { networkKind } from '../kinds.js'
import type { Logger } from '../log.js'
import type { WebhookTarget } from '../schema/actions.js'
import { endDeadline, startDeadline } from './deadlines.js'
import { DESTINATION_NOT_ALLOWED, DESTINATION_NOT_ALLOWED_CODE } from './egress.js'
import type { Outcome } from '../events.js'
import { interpretResponse, MAX_RESPONSE_BYTES, type HttpResponse } from './response.js'
import { signingKeys, withSignature, type SigningKeys } from './signing.js'
import { PayloadPathError, requestBodyText, substitute, UndefinedVariableError } from './template.js'
import { redactor, type Redactor } from '../text.js'

export const USER_AGENT = 'Contember Actions'

/** The result of one delivery attempt of one batch: an outcome per event, and how long the exchange took. */
export type Delivery = { outcomes: Map<string, Outcome>; durationMs: number }

/**
 * Where and how a target is reached once its variables are substituted, or why it cannot be. `redact`
 * replaces every current variable value of the project in receiver text before it is stored or logged.
 */
export type Address =
  | { ok: true; url: URL; origin: string; path: string; headers: Readonly<Record<string, string>>; redact: Redactor; signingKeys?: SigningKeys }
  | { ok: false; error: string }

/**
 * Substitutes the project's variables into a target's URL and headers. A drain does it once per
 * target, not per batch, and passes the one `redact` it built for all its targets (the same variables
 * make the same pattern); the result holds secrets and is never logged.
 */
export function addressTarget(target: WebhookTarget, variables: ReadonlyMap<string, string>, redact: Redactor = redactor(variables.values())): Address {
  let url: URL
  let headers: Record<string, string>
  try {
    url = new URL(substitute(target.url, variables))
    headers = requestHeaders(Object.entries(target.headers ?? {}).map(([k, v]) => [k, substitute(v, variables)]), url.protocol === 'https:')
  } catch (e) {
    return { ok: false, error: e instanceof UndefinedVariableError ? e.message : 'Invalid URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, error: 'Unsupported URL scheme' }
  const signing = signingKeys(target.signingSecret, variables)
  if (!signing.ok) return { ok: false, error: signing.error }
  // Split once here, as undici's request(url) would split it on every request (the fragment is not sent).
  const path = url.search ? `${url.pathname}${url.search}` : url.pathname
  return { ok: true, url, origin: url.origin, path, headers, redact, ...(signing.keys ? { signingKeys: signing.keys } : {}) }
}

/**
 * Upstream's headers, one line per name whatever case it was written in (names sent lower-case, as
 * fetch sends them): `User-Agent: Contember Actions`, and what upstream's fetch adds, `Accept` (any
 * type) and `Accept-Encoding` (`br` only over https, as fetch offers it), each unless the target sets
 * its own; the target's headers (two spellings of one name are joined with `, `, as fetch joins them);
 * and `Content-Type: application/json` always.
 */
function requestHeaders(targetHeaders: ReadonlyArray<readonly [string, string]>, https: boolean): Record<string, string> {
  const out = new Map<string, string>([['user-agent', USER_AGENT], ['accept', '*/*'], ['accept-encoding', https ? 'br, gzip, deflate' : 'gzip, deflate']])
  const own = new Set<string>()
  for (const [name, value] of targetHeaders) {
    const key = name.toLowerCase()
    const prev = out.get(key)
    out.set(key, own.has(key) && prev !== undefined ? `${prev}, ${value}` : value)
    own.add(key)
  }
  out.set('content-type', 'application/json')
  return Object.fromEntries(out)
}

/** A target as one delivery needs it: its options, its address, and its timeout with the default applied. */
export type Endpoint = { target: WebhookTarget; address: Address; timeoutMs: number }

/**
 * POSTs one batch to a webhook target and interprets the answer. Never throws for target trouble:
 * timeouts, refused connections and bad answers become failed outcomes. Nothing secret is logged.
 */
export async function deliver(http: Dispatcher, { target, address, timeoutMs }: Endpoint, events: readonly ClaimedEvent[], log: Logger): Promise<Delivery> {
  const ids = events.map(e => e.id)
  const started = performance.now()
  const finish = (outcomes: Map<string, Outcome>): Delivery => ({ outcomes, durationMs: Math.round(performance.now() - started) })
  const failAll = (errorMessage: string, kind: FailureKind) => finish(new Map(ids.map(id => [id, { ok: false, errorMessage, kind, wholeBatch: true }])))
  if (!address.ok) {
    log.warn('Webhook target could not be addressed', { target: target.name, error: address.error, events: ids })
    // No request was made: an undefined variable, an invalid URL or scheme, a missing signing secret.
    return failAll(address.error, 'misconfigured')
  }

  let body: string | Buffer
  try {
    body = requestBodyText(target, events)
  } catch (e) {
    if (!(e instanceof PayloadPathError)) throw e
    log.warn('Webhook target body template cannot hold the events', { target: target.name, error: e.message, events: ids })
    return failAll(e.message, 'misconfigured')
  }

  // One deadline for connect, headers and body together, on the shared timer (lib/delivery/deadlines.ts).
  const deadline = startDeadline(timeoutMs)
  let res: HttpResponse
  try {
    // The dispatcher's own request: the origin and path were split once per drain (addressTarget).
    const r = await http.request({
      origin: address.origin,
      path: address.path,
      method: 'POST',
      // Signed per attempt: the timestamp is this attempt's, and the signature covers the exact body bytes.
      headers: withSignature(address.headers, address.signingKeys, ids, body),
      body,
      signal: deadline.signal,
    })
    const retryAfter = r.headers['retry-after']
    res = {
      status: r.statusCode, statusText: r.statusText || statusText(r.statusCode), contentType: contentType(r.headers['content-type']),
      ...await readReply(r.body, r.headers['content-encoding']),
      // Read on 429 and 503 only (response.ts); a repeated header is malformed, so it is ignored.
      ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
    }
  } catch (e) {
    const code = errorCode(e) ?? errorCode(e instanceof Error ? e.cause : undefined)
    const message = deadline.expired ? `Timeout after ${timeoutMs} ms` : networkError(code)
    const kind = deadline.expired ? 'down' : networkKind(code)
    log.warn('Webhook delivery failed', { target: target.name, error: message, events: ids })
    return failAll(message, kind)
  } finally {
    endDeadline(deadline)
  }
  return finish(interpretResponse(res, ids, target.name, log, address.redact))
}

type Reply = Pick<HttpResponse, 'body' | 'truncated' | 'undecodable'>

/**
 * More content codings than this on one reply are refused, as undici's fetch refuses them: each is
 * one more decoder to allocate and run (curl's CVE-2022-32206).
 */
const MAX_CONTENT_CODINGS = 5
// As undici's fetch decodes: lenient about a stream cut short without its trailer, as browsers and curl are.
const ZLIB_OPTIONS: zlib.ZlibOptions = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }
const BROTLI_OPTIONS: zlib.BrotliOptions = { flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }
// The codings fetch decodes (a Map: the name is the receiver's, so no lookup may reach a prototype).
const DECODERS = new Map<string, () => Transform>([
  ['gzip', () => zlib.createGunzip(ZLIB_OPTIONS)],
  ['x-gzip', () => zlib.createGunzip(ZLIB_OPTIONS)],
  ['deflate', () => inflate()],
  ['br', () => zlib.createBrotliDecompress(BROTLI_OPTIONS)],
])

/**
 * Reads the reply as fetch's `.text()` would (README: The delivery contract): its content codings
 * decoded, the read limit counting decoded bytes. It always ends within the delivery's deadline: its
 * abort destroys the undici body, and the pipeline every decoder with it.
 */
function readReply(body: Dispatcher.ResponseData['body'], contentEncoding: string | string[] | undefined): Promise<Reply> {
  // The usual reply, plain: no stream but undici's.
  if (contentEncoding === undefined) return readBounded(body, () => body.destroy())
  const decoders = decodersFor(Array.isArray(contentEncoding) ? contentEncoding.join(',') : contentEncoding)
  if (decoders === undefined) {
    // Read, bounded, only to tell an empty body (which needs no decoding) from one that cannot be read.
    return readBounded(body, () => body.destroy())
      .then((r): Reply => r.body === '' && !r.truncated ? r : { body: '', truncated: false, undecodable: 'unsupported content encoding' })
  }
  if (decoders.length === 0) return readBounded(body, () => body.destroy())
  // Whichever stream fails first says what failed: the reply (reset, the deadline's abort) or a decoder.
  let failed: 'reply' | 'decoder' | undefined
  body.on('error', () => { failed ??= 'reply' })
  for (const d of decoders) d.on('error', () => { failed ??= 'decoder' })
  // The pipeline destroys every stream once one fails or closes early; its own error is read below.
  pipeline([body, ...decoders], () => {})
  const last = decoders[decoders.length - 1] ?? body
  const stop = () => {
    body.destroy()
    for (const d of decoders) d.destroy()
  }
  return readBounded(last, stop).catch((e: unknown): Reply => {
    // Our words: zlib's message says nothing useful to the target's owner, and the body is not quoted.
    if (failed === 'decoder') return { body: '', truncated: false, undecodable: 'body could not be decoded' }
    throw e
  })
}

/**
 * The decoders for a `Content-Encoding` value, in the order they apply (the last coding listed was
 * applied last, so it is undone first, as fetch does); none for `identity`; undefined if one is not
 * known or there are too many.
 */
function decodersFor(contentEncoding: string): Transform[] | undefined {
  const codings = contentEncoding.toLowerCase().split(',').map(c => c.trim()).filter(c => c !== '' && c !== 'identity')
  if (codings.length > MAX_CONTENT_CODINGS) return undefined
  const makers: Array<() => Transform> = []
  for (const coding of codings) {
    const make = DECODERS.get(coding)
    if (!make) return undefined
    makers.unshift(make)
  }
  // Made only once every coding is known: a decoder made and never used would hold a zlib handle.
  return makers.map(make => make())
}

/**
 * `deflate` as fetch reads it: zlib-wrapped when the first byte names the deflate method (CM = 8, the
 * low nibble), raw deflate otherwise, since servers send both. Destroying it destroys the inner stream.
 */
function inflate(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | undefined
  const outer: Transform = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (!inner) {
        if (chunk.length === 0) return done()
        inner = ((chunk[0] ?? 0) & 0x0f) === 0x08 ? zlib.createInflate(ZLIB_OPTIONS) : zlib.createInflateRaw(ZLIB_OPTIONS)
        inner.on('data', (c: Buffer) => outer.push(c))
        inner.on('error', e => outer.destroy(e))
      }
      // The next chunk waits until this one is inflated, so input never piles up here.
      inner.write(chunk, e => done(e ?? null))
    },
    flush(done) {
      if (!inner) return done()
      inner.once('end', () => done())
      inner.end()
    },
    destroy(e, done) {
      inner?.destroy()
      done(e)
    },
  })
  return outer
}

/**
 * Reads `source` (undici's body, or the last decoder) up to {@link MAX_RESPONSE_BYTES}, then calls
 * `stop`, which destroys the body: the socket is closed rather than drained, so a huge body (or a
 * compressed one that expands without end) costs nothing more. Listeners, not `for await`: the async
 * iterator costs more than an empty answer's whole exchange (bench/levers-request.ts).
 */
function readBounded(source: Readable, stop: () => void): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    const text = () => chunks.length === 0 ? '' : withoutBom(Buffer.concat(chunks).toString('utf8'))
    source.on('data', (chunk: Buffer | string) => {
      if (done) return
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)
      if (size + buf.length > MAX_RESPONSE_BYTES) {
        done = true
        chunks.push(buf.subarray(0, MAX_RESPONSE_BYTES - size))
        resolve({ body: text(), truncated: true })
        stop()
        return
      }
      chunks.push(buf)
      size += buf.length
    })
    source.on('end', () => {
      done = true
      resolve({ body: text(), truncated: false })
    })
    source.on('error', e => {
      done = true
      reject(e)
    })
    // Closed without an end or an error (not expected of undici): never leave the delivery waiting.
    source.on('close', () => {
      if (!done) reject(new Error('Response body closed early'))
    })
  })
}

// fetch's `.text()` decodes UTF-8 with BOM sniffing: one leading U+FEFF is not part of the text.
function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
}

/** Our own words for network failures: SDK and socket messages may quote the host and port. */
function networkError(code: string | undefined): string {
  switch (code) {
    case DESTINATION_NOT_ALLOWED_CODE: return DESTINATION_NOT_ALLOWED
    case 'ECONNREFUSED': return 'Connection refused'
    case 'ECONNRESET': case 'UND_ERR_SOCKET': return 'Connection reset'
    case 'ENOTFOUND': case 'EAI_AGAIN': return 'Host not found'
    case 'UND_ERR_HEADERS_TIMEOUT': case 'UND_ERR_BODY_TIMEOUT': case 'UND_ERR_CONNECT_TIMEOUT': return 'Timeout'
    default: return code ? `Network error (${code})` : 'Network error'
  }
}

// The standard reason phrase, for a status line that carries none (HTTP/2 never does).
function statusText(status: number): string {
  return STATUS_CODES[status] ?? ''
}

function contentType(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

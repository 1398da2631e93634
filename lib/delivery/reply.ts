// Reading a webhook's reply as fetch's `.text()` would: content codings decoded, bounded in decoded
// bytes, and always ended within the delivery's deadline.
import { pipeline, Transform, type Readable } from 'node:stream'
import zlib from 'node:zlib'
import type { Dispatcher } from 'undici'
import { MAX_RESPONSE_BYTES, type HttpResponse } from './response.js'

/** The body part of an {@link HttpResponse}: the text read, whether it was cut, and why it could not be decoded. */
export type Reply = Pick<HttpResponse, 'body' | 'truncated' | 'undecodable'>

/**
 * More content codings than this on one reply are refused, as undici's fetch refuses them: each is
 * one more decoder to allocate and run (curl's CVE-2022-32206).
 */
const MAX_CONTENT_CODINGS = 5
// As undici's fetch decodes: lenient about a stream cut short without its trailer, as browsers and curl are.
const ZLIB_OPTIONS: zlib.ZlibOptions = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }
const BROTLI_OPTIONS: zlib.BrotliOptions = {
  flush: zlib.constants.BROTLI_OPERATION_FLUSH,
  finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
}
// The codings fetch decodes (a Map: the name is the receiver's, so no lookup may reach a prototype).
const DECODERS = new Map<string, () => Transform>([
  ['gzip', () => zlib.createGunzip(ZLIB_OPTIONS)],
  ['x-gzip', () => zlib.createGunzip(ZLIB_OPTIONS)],
  ['deflate', () => inflate()],
  ['br', () => zlib.createBrotliDecompress(BROTLI_OPTIONS)],
])

/**
 * Reads the reply as fetch's `.text()` would (docs/delivery.md): its content codings
 * decoded, the read limit counting decoded bytes. It always ends within the delivery's deadline: its
 * abort destroys the undici body, and the pipeline every decoder with it.
 */
export function readReply(body: Dispatcher.ResponseData['body'], contentEncoding: string | string[] | undefined): Promise<Reply> {
  // The usual reply, plain: no stream but undici's.
  if (contentEncoding === undefined) return readBounded(body, () => body.destroy())
  const decoders = decodersFor(Array.isArray(contentEncoding) ? contentEncoding.join(',') : contentEncoding)
  if (decoders === undefined) {
    // Read, bounded, only to tell an empty body (which needs no decoding) from one that cannot be read.
    return readBounded(body, () => body.destroy()).then((r): Reply =>
      r.body === '' && !r.truncated ? r : { body: '', truncated: false, undecodable: 'unsupported content encoding' },
    )
  }
  if (decoders.length === 0) return readBounded(body, () => body.destroy())
  // Whichever stream fails first says what failed: the reply (reset, the deadline's abort) or a decoder.
  let failed: 'reply' | 'decoder' | undefined
  body.on('error', () => {
    failed ??= 'reply'
  })
  for (const d of decoders)
    d.on('error', () => {
      failed ??= 'decoder'
    })
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
  const codings = contentEncoding
    .toLowerCase()
    .split(',')
    .map(c => c.trim())
    .filter(c => c !== '' && c !== 'identity')
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
    const text = () => (chunks.length === 0 ? '' : withoutBom(Buffer.concat(chunks).toString('utf8')))
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

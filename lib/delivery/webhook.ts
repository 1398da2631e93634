import { STATUS_CODES } from 'node:http'
import { request, type Dispatcher } from 'undici'
import type { EventRow } from '../db/events.js'
import type { Logger } from '../log.js'
import { TARGET_DEFAULTS, type WebhookTarget } from '../schema/actions.js'
import { DESTINATION_NOT_ALLOWED, DESTINATION_NOT_ALLOWED_CODE } from './egress.js'
import { interpretResponse, MAX_RESPONSE_BYTES, type HttpResponse, type Outcome } from './response.js'
import { signingKeys, withSignature, type SigningKeys } from './signing.js'
import { PayloadPathError, requestBody, substitute, UndefinedVariableError } from './template.js'
import { redactor, type Redactor } from './text.js'

export { MAX_RESPONSE_BYTES } from './response.js'
export const USER_AGENT = 'Contember Actions'

/** The result of one delivery attempt of one batch: an outcome per event, and how long the exchange took. */
export type Delivery = { outcomes: Map<string, Outcome>; durationMs: number }

/**
 * Where and how a target is reached once its variables are substituted, or why it cannot be. `redact`
 * replaces every current variable value of the project in receiver text before it is stored or logged.
 */
export type Address =
  | { ok: true; url: URL; headers: Readonly<Record<string, string>>; redact: Redactor; signingKeys?: SigningKeys }
  | { ok: false; error: string }

/**
 * Substitutes the project's variables into a target's URL and headers. A drain does it once per
 * target, not per batch; the result holds secrets and is never logged.
 */
export function addressTarget(target: WebhookTarget, variables: ReadonlyMap<string, string>): Address {
  let url: URL
  let headers: Record<string, string>
  try {
    url = new URL(substitute(target.url, variables))
    headers = requestHeaders(Object.entries(target.headers ?? {}).map(([k, v]) => [k, substitute(v, variables)]))
  } catch (e) {
    return { ok: false, error: e instanceof UndefinedVariableError ? e.message : 'Invalid URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, error: 'Unsupported URL scheme' }
  const signing = signingKeys(target.signingSecret, variables)
  if (!signing.ok) return { ok: false, error: signing.error }
  return { ok: true, url, headers, redact: redactor(variables.values()), ...(signing.keys ? { signingKeys: signing.keys } : {}) }
}

/**
 * Upstream's headers, one line per name whatever case it was written in (names sent lower-case, as
 * fetch sends them): `User-Agent: Contember Actions` unless the target sets its own, the target's
 * headers (two spellings of one name are joined with `, `, as fetch joins them), and
 * `Content-Type: application/json` always.
 */
function requestHeaders(targetHeaders: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const out = new Map<string, string>([['user-agent', USER_AGENT]])
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

/**
 * POSTs one batch to a webhook target and interprets the answer. Never throws for target trouble:
 * timeouts, refused connections and bad answers become failed outcomes. Nothing secret is logged.
 */
export async function deliver(http: Dispatcher, target: WebhookTarget, address: Address, events: readonly EventRow[], log: Logger): Promise<Delivery> {
  const ids = events.map(e => e.id)
  const started = performance.now()
  const finish = (outcomes: Map<string, Outcome>): Delivery => ({ outcomes, durationMs: Math.round(performance.now() - started) })
  const failAll = (errorMessage: string) => finish(new Map(ids.map(id => [id, { ok: false, errorMessage }])))
  if (!address.ok) {
    log.warn('Webhook target could not be addressed', { target: target.name, error: address.error, events: ids })
    return failAll(address.error)
  }

  let body: string
  try {
    body = JSON.stringify(requestBody(target, events))
  } catch (e) {
    if (!(e instanceof PayloadPathError)) throw e
    log.warn('Webhook target body template cannot hold the events', { target: target.name, error: e.message, events: ids })
    return failAll(e.message)
  }

  const timeoutMs = target.timeoutMs ?? TARGET_DEFAULTS.timeoutMs
  const abort = new AbortController()
  // One deadline for connect, headers and body together.
  const timer = setTimeout(() => abort.abort(), timeoutMs)
  let res: HttpResponse
  try {
    const r = await request(address.url, {
      method: 'POST',
      // Signed per attempt: the timestamp is this attempt's, and the signature covers the exact body bytes.
      headers: withSignature(address.headers, address.signingKeys, ids, body),
      body,
      dispatcher: http,
      signal: abort.signal,
    })
    const retryAfter = r.headers['retry-after']
    res = {
      status: r.statusCode, statusText: r.statusText || statusText(r.statusCode), contentType: contentType(r.headers['content-type']), ...await readBounded(r.body),
      // Read on 429 and 503 only (response.ts); a repeated header is malformed, so it is ignored.
      ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
    }
  } catch (e) {
    const message = abort.signal.aborted ? `Timeout after ${timeoutMs} ms` : networkError(e)
    log.warn('Webhook delivery failed', { target: target.name, error: message, events: ids })
    return failAll(message)
  } finally {
    clearTimeout(timer)
  }
  return finish(interpretResponse(res, ids, target.name, log, address.redact))
}

async function readBounded(body: Dispatcher.ResponseData['body']): Promise<{ body: string; truncated: boolean }> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)
    if (size + buf.length > MAX_RESPONSE_BYTES) {
      chunks.push(buf.subarray(0, MAX_RESPONSE_BYTES - size))
      // Stop reading: the socket is closed rather than drained, so a huge body costs nothing more.
      body.destroy()
      return { body: Buffer.concat(chunks).toString('utf8'), truncated: true }
    }
    chunks.push(buf)
    size += buf.length
  }
  return { body: Buffer.concat(chunks).toString('utf8'), truncated: false }
}

/** Our own words for network failures: SDK and socket messages may quote the host and port. */
function networkError(e: unknown): string {
  const code = errorCode(e) ?? errorCode(e instanceof Error ? e.cause : undefined)
  switch (code) {
    case DESTINATION_NOT_ALLOWED_CODE: return DESTINATION_NOT_ALLOWED
    case 'ECONNREFUSED': return 'Connection refused'
    case 'ECONNRESET': case 'UND_ERR_SOCKET': return 'Connection reset'
    case 'ENOTFOUND': case 'EAI_AGAIN': return 'Host not found'
    case 'UND_ERR_HEADERS_TIMEOUT': case 'UND_ERR_BODY_TIMEOUT': case 'UND_ERR_CONNECT_TIMEOUT': return 'Timeout'
    default: return code ? `Network error (${code})` : 'Network error'
  }
}

function errorCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined
}

// The standard reason phrase, for a status line that carries none (HTTP/2 never does).
function statusText(status: number): string {
  return STATUS_CODES[status] ?? ''
}

function contentType(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

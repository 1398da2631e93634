import { STATUS_CODES } from 'node:http'
import { request, type Dispatcher } from 'undici'
import type { EventRow } from '../db/events.js'
import type { Logger } from '../log.js'
import { TARGET_DEFAULTS, type WebhookTarget } from '../schema/actions.js'
import { DESTINATION_NOT_ALLOWED, DESTINATION_NOT_ALLOWED_CODE } from './egress.js'
import { interpretResponse, type HttpResponse, type Outcome } from './response.js'
import { signingKeys, withSignature, type SigningKeys } from './signing.js'
import { requestBody, substitute, UndefinedVariableError } from './template.js'

/** Response bytes read at most; the rest is discarded unread (a target can answer with anything). */
export const MAX_RESPONSE_BYTES = 1024 * 1024
export const USER_AGENT = 'Contember Actions'

/** The result of one delivery attempt of one batch: an outcome per event, and how long the exchange took. */
export type Delivery = { outcomes: Map<string, Outcome>; durationMs: number }

/** Where and how a target is reached once its variables are substituted, or why it cannot be. */
export type Address = { ok: true; url: URL; headers: Readonly<Record<string, string>>; signingKeys?: SigningKeys } | { ok: false; error: string }

/**
 * Substitutes the project's variables into a target's URL and headers. A drain does it once per
 * target, not per batch; the result holds secrets and is never logged.
 */
export function addressTarget(target: WebhookTarget, variables: ReadonlyMap<string, string>): Address {
  let url: URL
  let headers: Record<string, string>
  try {
    url = new URL(substitute(target.url, variables))
    headers = Object.fromEntries(Object.entries(target.headers ?? {}).map(([k, v]) => [k, substitute(v, variables)]))
  } catch (e) {
    return { ok: false, error: e instanceof UndefinedVariableError ? e.message : 'Invalid URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, error: 'Unsupported URL scheme' }
  const signing = signingKeys(target.signingSecret, variables)
  if (!signing.ok) return { ok: false, error: signing.error }
  return { ok: true, url, headers: { ...headers, 'content-type': 'application/json', 'user-agent': USER_AGENT }, ...(signing.keys ? { signingKeys: signing.keys } : {}) }
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

  const timeoutMs = target.timeoutMs ?? TARGET_DEFAULTS.timeoutMs
  const abort = new AbortController()
  // One deadline for connect, headers and body together.
  const timer = setTimeout(() => abort.abort(), timeoutMs)
  let res: HttpResponse
  try {
    const body = JSON.stringify(requestBody(target, events))
    const r = await request(address.url, {
      method: 'POST',
      // Signed per attempt: the timestamp is this attempt's, and the signature covers the exact body bytes.
      headers: withSignature(address.headers, address.signingKeys, ids, body),
      body,
      dispatcher: http,
      signal: abort.signal,
    })
    res = { status: r.statusCode, statusText: statusText(r.statusCode), ...await readBounded(r.body) }
  } catch (e) {
    const message = abort.signal.aborted ? `Timeout after ${timeoutMs} ms` : networkError(e)
    log.warn('Webhook delivery failed', { target: target.name, error: message, events: ids })
    return failAll(message)
  } finally {
    clearTimeout(timer)
  }
  return finish(interpretResponse(res, ids, target.name, log))
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

// undici's request() does not expose the reason phrase; the standard one is what operators expect to read.
function statusText(status: number): string {
  return STATUS_CODES[status] ?? ''
}

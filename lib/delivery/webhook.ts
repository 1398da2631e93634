import { STATUS_CODES } from 'node:http'
import type { Dispatcher } from 'undici'
import { errorCode } from '../errors.js'
import type { ClaimedEvent, FailureKind } from '../events.js'
import { networkKind } from '../kinds.js'
import type { Logger } from '../log.js'
import type { WebhookTarget } from '../schema/actions.js'
import { DESTINATION_NOT_ALLOWED, DESTINATION_NOT_ALLOWED_CODE } from './egress.js'
import { hostAllowed } from './hosts.js'
import type { Outcome } from '../events.js'
import { readReply } from './reply.js'
import { interpretResponse, type HttpResponse } from './response.js'
import { signingKeys, withSignature, type SigningKeys } from './signing.js'
import { PayloadPathError, requestBodyText, substitute, UndefinedVariableError } from './template.js'
import { redactor, type Redactor } from '../text.js'

const USER_AGENT = 'Contember Actions'

/** The result of one delivery attempt of one batch: an outcome per event, and how long the exchange took. */
export type Delivery = { outcomes: Map<string, Outcome>; durationMs: number }

/**
 * Where and how a target is reached once its variables are substituted, or why it cannot be. `redact`
 * replaces every current variable value of the project in receiver text before it is stored or logged.
 */
export type Address =
  | {
      ok: true
      url: URL
      origin: string
      path: string
      headers: Readonly<Record<string, string>>
      redact: Redactor
      signingKeys?: SigningKeys
    }
  | { ok: false; error: string }

/**
 * Substitutes the project's variables into a target's URL and headers. A drain does it once per
 * target, not per batch, and passes the one `redact` it built for all its targets (the same variables
 * make the same pattern); the result holds secrets and is never logged.
 */
export function addressTarget(
  target: WebhookTarget,
  variables: ReadonlyMap<string, string>,
  redact: Redactor = redactor(variables.values()),
): Address {
  let url: URL
  let headers: Record<string, string>
  try {
    url = new URL(substitute(target.url, variables))
    headers = requestHeaders(
      Object.entries(target.headers ?? {}).map(([k, v]) => [k, substitute(v, variables)]),
      url.protocol === 'https:',
    )
  } catch (e) {
    return { ok: false, error: e instanceof UndefinedVariableError ? e.message : 'Invalid URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, error: 'Unsupported URL scheme' }
  // The admin's bound on where the target goes, whoever set its variables (lib/delivery/hosts.ts).
  if (target.allowedHosts && !hostAllowed(url.hostname, target.allowedHosts)) return { ok: false, error: 'URL host not in allowedHosts' }
  const signing = signingKeys(target.signingSecret, variables)
  if (!signing.ok) return { ok: false, error: signing.error }
  // Split once here, as undici's request(url) would split it on every request (the fragment is not sent).
  const path = url.search ? `${url.pathname}${url.search}` : url.pathname
  return { ok: true, url, origin: url.origin, path, headers, redact, ...(signing.keys ? { signingKeys: signing.keys } : {}) }
}

/**
 * The request's headers in upstream's case and order, as its `fetch` put them on the wire (checked
 * against a raw receiver's header lines, test/compat/wire.test.ts): `User-Agent: Contember Actions`;
 * the target's headers in the order the schema declares them, each name as written (two spellings of
 * one name are one line, under the first, values joined with `, ` as fetch joins them); then
 * `Content-type: application/json`; then what fetch adds, `accept` (any type) and `accept-encoding`
 * (`br` only over https, as fetch offers it), each unless the target sets its own. Differences, on
 * purpose (docs/compatibility.md): a target's own User-Agent replaces ours in any case (fetch joins a
 * differently spelled one to it), and its Content-Type is dropped (fetch joins or keeps it at its
 * place). Undici writes the names as given and in this order, after `host` and `connection` and
 * before `content-length`; the object is built once per target, so a request pays nothing for it.
 */
function requestHeaders(targetHeaders: ReadonlyArray<readonly [string, string]>, https: boolean): Record<string, string> {
  const lines = new Map<string, [string, string]>([['user-agent', ['User-Agent', USER_AGENT]]])
  for (const [name, value] of targetHeaders) {
    const key = name.toLowerCase()
    if (key === 'content-type') continue
    const prev = lines.get(key)
    if (key === 'user-agent' || prev === undefined) lines.set(key, [prev?.[0] ?? name, value])
    else prev[1] = `${prev[1]}, ${value}`
  }
  lines.set('content-type', ['Content-type', 'application/json'])
  if (!lines.has('accept')) lines.set('accept', ['accept', '*/*'])
  if (!lines.has('accept-encoding')) lines.set('accept-encoding', ['accept-encoding', https ? 'br, gzip, deflate' : 'gzip, deflate'])
  return Object.fromEntries(lines.values())
}

/**
 * The trace headers go where upstream puts them: right after `User-Agent`, before the target's own
 * (only when tracing to webhooks is on). A name the target sets itself, in any case, stays the
 * target's, one line (its traceparent also keeps our tracestate out, lib/tracing/context.ts).
 */
function withTrace(headers: Readonly<Record<string, string>>, trace: Record<string, string>): Record<string, string> {
  const [first, ...rest] = Object.entries(headers)
  const own = new Set(rest.map(([name]) => name.toLowerCase()))
  const added = Object.entries(trace).filter(([name]) => !own.has(name.toLowerCase()))
  return Object.fromEntries(first ? [first, ...added, ...rest] : added)
}

/** A target as one delivery needs it: its options, its address, and its timeout with the default applied. */
export type Endpoint = { target: WebhookTarget; address: Address; timeoutMs: number }

/**
 * POSTs one batch to a webhook target and interprets the answer. Never throws for target trouble:
 * timeouts, refused connections and bad answers become failed outcomes. Nothing secret is logged.
 * `traceHeaders` adds headers given the target's own (TRACES_TO_WEBHOOKS: the webhook span's traceparent).
 */
export async function deliver(
  http: Dispatcher,
  { target, address, timeoutMs }: Endpoint,
  events: readonly ClaimedEvent[],
  log: Logger,
  traceHeaders?: (headers: Readonly<Record<string, string>>) => Record<string, string>,
): Promise<Delivery> {
  const ids = events.map(e => e.id)
  const started = performance.now()
  const finish = (outcomes: Map<string, Outcome>): Delivery => ({ outcomes, durationMs: Math.round(performance.now() - started) })
  const failAll = (errorMessage: string, kind: FailureKind) =>
    finish(new Map(ids.map(id => [id, { ok: false, errorMessage, kind, wholeBatch: true }])))
  if (!address.ok) {
    log.warn('Webhook target could not be addressed', { target: target.name, error: address.error, events: ids })
    // No request was made: an undefined variable, an invalid URL or scheme, a missing signing secret.
    return failAll(address.error, 'misconfigured')
  }

  let body: string | Buffer
  try {
    body = requestBodyText(target, events)
    // A large batch's body is a Buffer, outside the JS heap; its payload strings (as large, on the
    // heap) are let go now, not when the batch's outcome is in: while the request is in flight, the
    // heap holds no copy of the batch, so the next claim's payloads find room beside it.
    if (typeof body !== 'string') for (const e of events) e.payload = ''
  } catch (e) {
    if (!(e instanceof PayloadPathError)) throw e
    log.warn('Webhook target body template cannot hold the events', { target: target.name, error: e.message, events: ids })
    return failAll(e.message, 'misconfigured')
  }

  const sent = await exchange(http, address, ids, body, timeoutMs, traceHeaders?.(address.headers))
  if (!sent.ok) {
    log.warn('Webhook delivery failed', { target: target.name, error: sent.error, events: ids })
    return failAll(sent.error, sent.kind)
  }
  return finish(interpretResponse(sent.res, ids, target.name, log, address.redact))
}

/**
 * One POST and its reply under one deadline for connect, headers and body together (a controller and
 * a timer per request: a shared timer measured no cheaper on Node 22, `actions-b1`/`actions-b50`). A
 * failure is a value in our own words, with its kind.
 */
async function exchange(
  http: Dispatcher,
  address: Extract<Address, { ok: true }>,
  ids: readonly string[],
  body: string | Buffer,
  timeoutMs: number,
  trace: Record<string, string> | undefined,
): Promise<{ ok: true; res: HttpResponse } | { ok: false; error: string; kind: FailureKind }> {
  const abort = new AbortController()
  let expired = false
  const timer = setTimeout(() => {
    expired = true
    abort.abort()
  }, timeoutMs)
  try {
    // The dispatcher's own request: the origin and path were split once per drain (addressTarget).
    const r = await http.request({
      origin: address.origin,
      path: address.path,
      method: 'POST',
      // Signed per attempt: the timestamp is this attempt's, and the signature covers the exact body bytes
      // (trace headers, like every header, are not signed).
      headers: withSignature(trace ? withTrace(address.headers, trace) : address.headers, address.signingKeys, ids, body),
      body,
      signal: abort.signal,
    })
    const retryAfter = r.headers['retry-after']
    return {
      ok: true,
      res: {
        status: r.statusCode,
        statusText: r.statusText || statusText(r.statusCode),
        contentType: contentType(r.headers['content-type']),
        ...(await readReply(r.body, r.headers['content-encoding'])),
        // Read on 429 and 503 only (response.ts); a repeated header is malformed, so it is ignored.
        ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
      },
    }
  } catch (e) {
    const code = errorCode(e) ?? errorCode(e instanceof Error ? e.cause : undefined)
    if (expired) return { ok: false, error: `Timeout after ${timeoutMs} ms`, kind: 'down' }
    return { ok: false, error: networkError(code), kind: networkKind(code) }
  } finally {
    clearTimeout(timer)
  }
}

/** Our own words for network failures: SDK and socket messages may quote the host and port. */
function networkError(code: string | undefined): string {
  switch (code) {
    case DESTINATION_NOT_ALLOWED_CODE:
      return DESTINATION_NOT_ALLOWED
    case 'ECONNREFUSED':
      return 'Connection refused'
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'Connection reset'
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'Host not found'
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'Timeout'
    default:
      return code ? `Network error (${code})` : 'Network error'
  }
}

// The standard reason phrase, for a status line that carries none (HTTP/2 never does).
function statusText(status: number): string {
  return STATUS_CODES[status] ?? ''
}

function contentType(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

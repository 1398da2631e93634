// Standard Webhooks signing (https://www.standardwebhooks.com): receivers verify with any of the
// spec's libraries that a request comes from us, unaltered, and recently.
import { createHash, createHmac, randomBytes } from 'node:crypto'

/** The spec's prefix of a symmetric secret; the rest is the key, base64. */
const SECRET_PREFIX = 'whsec_'
/** The spec's key size bounds: shorter keys are guessable, longer ones add nothing to HMAC-SHA256. */
const MIN_SECRET_BYTES = 24
const MAX_SECRET_BYTES = 64
/** Key size of a generated secret (the spec's libraries generate 24 to 32 bytes). */
const GENERATED_SECRET_BYTES = 32
/** Secrets at once: a rotation needs two; each costs one HMAC per request and bytes in the header. */
const MAX_SIGNING_SECRETS = 4

/** Decoded HMAC keys of one target, in the order the variable lists them. */
export type SigningKeys = readonly Buffer[]

// The whole field must be one placeholder: a secret written into the schema would be stored and shown.
const REFERENCE = /^\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}$/
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

/**
 * Reads the secrets a target's `signingSecret` (`{{NAME}}`) names. Undefined keys: the target does
 * not sign. Messages name the variable, never its value.
 */
export function signingKeys(
  reference: string | undefined,
  variables: ReadonlyMap<string, string>,
): { ok: true; keys?: SigningKeys } | { ok: false; error: string } {
  if (reference === undefined) return { ok: true }
  const name = REFERENCE.exec(reference)?.[1]
  if (!name) return { ok: false, error: 'signingSecret must name a variable as {{NAME}}' }
  const secrets = (variables.get(name) ?? '').split(/\s+/).filter(Boolean)
  if (secrets.length === 0) return { ok: false, error: `Undefined signing secret variable ${name}` }
  if (secrets.length > MAX_SIGNING_SECRETS)
    return { ok: false, error: `Signing secret variable ${name} holds more than ${MAX_SIGNING_SECRETS} secrets` }
  const keys = secrets.map(decodeSecret)
  if (keys.some(k => k === undefined)) {
    return {
      ok: false,
      error: `Signing secret variable ${name} must hold ${SECRET_PREFIX} secrets of ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes in base64, space-separated`,
    }
  }
  return { ok: true, keys: keys.filter(k => k !== undefined) }
}

function decodeSecret(secret: string): Buffer | undefined {
  if (!secret.startsWith(SECRET_PREFIX)) return undefined
  const text = secret.slice(SECRET_PREFIX.length)
  if (!BASE64.test(text)) return undefined
  const key = Buffer.from(text, 'base64')
  // Buffer.from skips what it cannot read; a round trip proves every character was key material.
  if (key.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, '')) return undefined
  return key.length >= MIN_SECRET_BYTES && key.length <= MAX_SECRET_BYTES ? key : undefined
}

/** A fresh secret in the spec's format, for `actions signing new`. */
export function generateSecret(bytes = GENERATED_SECRET_BYTES): string {
  return SECRET_PREFIX + randomBytes(bytes).toString('base64')
}

/**
 * The `webhook-id` of a batch: the event id when it holds one event, else `batch_` and the SHA-256
 * (hex) of the sorted event ids joined by commas, so the same events give the same id whatever
 * their order. Receivers dedupe per event by `meta.eventId`.
 */
function webhookId(eventIds: readonly string[]): string {
  if (eventIds.length === 1 && eventIds[0] !== undefined) return eventIds[0]
  return (
    'batch_' +
    createHash('sha256')
      .update([...eventIds].sort().join(','))
      .digest('hex')
  )
}

/** The `webhook-signature` value: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per key, space-separated. */
function sign(keys: SigningKeys, id: string, timestamp: number, body: string | Buffer): string {
  const prefix = `${id}.${timestamp}.`
  return keys.map(key => 'v1,' + createHmac('sha256', key).update(prefix).update(body).digest('base64')).join(' ')
}

const SIGNATURE_HEADERS: ReadonlySet<string> = new Set(['webhook-id', 'webhook-timestamp', 'webhook-signature'])

/**
 * The request headers with the three signature headers added when the target signs (ours replace
 * any the target set, whatever their case). The timestamp is this attempt's, in seconds.
 */
export function withSignature(
  headers: Readonly<Record<string, string>>,
  keys: SigningKeys | undefined,
  eventIds: readonly string[],
  body: string | Buffer,
  nowMs = Date.now(),
): Readonly<Record<string, string>> {
  if (!keys) return headers
  const id = webhookId(eventIds)
  const timestamp = Math.floor(nowMs / 1000)
  const kept = Object.entries(headers).filter(([name]) => !SIGNATURE_HEADERS.has(name.toLowerCase()))
  return {
    ...Object.fromEntries(kept),
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(keys, id, timestamp, body),
  }
}

import type { Logger } from '../log.js'

/** What one attempt did to one event. `entry` is appended to the event's log when the attempt failed. */
export type Outcome =
  | { ok: true; code: number }
  | { ok: false; code?: number; errorMessage: string; response?: string }

/** Bytes of a response body kept in an event's log. */
export const STORED_RESPONSE_BYTES = 4 * 1024

/** A completed HTTP exchange, body already read up to the read limit. */
export type HttpResponse = { status: number; statusText: string; body: string; truncated: boolean }

/**
 * Interprets a webhook response for a batch (DESIGN.md section 4): every event gets an outcome.
 * Warnings name the target and event ids only.
 */
export function interpretResponse(res: HttpResponse, eventIds: readonly string[], target: string, log: Logger): Map<string, Outcome> {
  const all = (o: Outcome) => new Map(eventIds.map(id => [id, o]))
  const stored = res.body.slice(0, STORED_RESPONSE_BYTES)
  if (res.status < 200 || res.status >= 300) {
    log.warn('Webhook target responded with an error status', { target, status: res.status, statusText: res.statusText, events: eventIds })
    return all({ ok: false, code: res.status, errorMessage: res.statusText || `HTTP ${res.status}`, response: stored })
  }
  const parsed = parseJson(res)
  // Upstream semantics: an empty or non-JSON 2xx body, or JSON without `failures`, means all delivered.
  if (!isObject(parsed) || !('failures' in parsed)) return all({ ok: true, code: res.status })
  const failures = parseFailures(parsed.failures)
  if (!failures) {
    log.warn('Webhook target returned a malformed response', { target, status: res.status, events: eventIds })
    return all({ ok: false, code: res.status, errorMessage: 'Malformed response: invalid "failures"', response: stored })
  }
  const inBatch = new Set(eventIds)
  const outside = [...failures.keys()].filter(id => !inBatch.has(id))
  if (outside.length) {
    log.warn('Webhook target reported failures for event ids outside the batch', { target, status: res.status, unknownEventIds: outside.length, events: eventIds })
    return all({ ok: false, code: res.status, errorMessage: 'Malformed response: failures name events outside the batch', response: stored })
  }
  const failedIds = eventIds.filter(id => failures.has(id))
  if (failedIds.length) log.warn('Webhook target reported failed events', { target, status: res.status, events: failedIds })
  return new Map(eventIds.map((id): [string, Outcome] => {
    if (!failures.has(id)) return [id, { ok: true, code: res.status }]
    return [id, { ok: false, code: res.status, errorMessage: failures.get(id) ?? 'Reported failed by the target' }]
  }))
}

function parseJson(res: HttpResponse): unknown {
  if (res.truncated || res.body.trim() === '') return undefined
  try {
    return JSON.parse(res.body)
  } catch {
    return undefined
  }
}

/** `failures` must be an array of `{ eventId: string, error?: string }`; anything else is malformed (undefined). */
function parseFailures(value: unknown): Map<string, string | undefined> | undefined {
  if (!Array.isArray(value)) return undefined
  const out = new Map<string, string | undefined>()
  for (const item of value) {
    if (!isObject(item) || typeof item.eventId !== 'string') return undefined
    if (item.error !== undefined && typeof item.error !== 'string') return undefined
    out.set(item.eventId, item.error)
  }
  return out
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

// What the delivery's tests compare against, written apart from lib/delivery so a test does not
// check the code with itself.
import type { WebhookTarget } from '../../lib/schema/actions.js'

type Json = { [key: string]: unknown }
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * The request body as upstream builds it, serialized: a copy of `target.body` (or `{}`), objects
 * created along `payloadPath` where a key is missing or null, and `events` set in the last one.
 * The copy goes through JSON, so a `__proto__` key is an own key, as in a schema read from jsonb.
 */
export function upstreamBody(target: WebhookTarget, events: unknown): string {
  const body: unknown = JSON.parse(JSON.stringify(target.body ?? {}))
  if (!isObject(body)) throw new Error('the body template is not an object')
  let node = body
  for (const key of target.payloadPath ?? []) {
    const next = Object.hasOwn(node, key) ? node[key] : undefined
    if (next !== undefined && next !== null && !isObject(next))
      throw new Error(`payloadPath runs into a value that is not an object at ${key}`)
    const child: Json = isObject(next) ? next : {}
    // defineProperty: a plain assignment to `__proto__` would set the prototype instead of a key.
    Object.defineProperty(node, key, { value: child, enumerable: true, writable: true, configurable: true })
    node = child
  }
  Object.defineProperty(node, 'events', { value: events, enumerable: true, writable: true, configurable: true })
  return JSON.stringify(body)
}

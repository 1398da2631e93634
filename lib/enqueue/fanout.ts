import type { ActionsSchema, BasicTrigger } from '../schema/actions.js'
import type { JsonArray, JsonObject, JsonValue } from '../schema/json.js'
import type { Mutation } from '../schema/payload.js'

// Mutations in, triggers out: the basic-trigger rules of upstream's TriggerListenersBuilder and
// TriggerHandler, for content APIs that do not know trigger names. Watch triggers need the content
// model to follow relations, so they still have to be named by the producer.

/** One trigger a mutation fires, with the payload upstream's TriggerPayloadBuilder would build for it. */
export type Fired = { trigger: string; target: string; priority: number; payload: JsonObject }

/** The project's basic triggers the mutation fires, in schema order, each with its payload. */
export function fanOut(schema: ActionsSchema, mutation: Mutation): Fired[] {
  const fired: Fired[] = []
  for (const [name, trigger] of Object.entries(schema.triggers)) {
    if (trigger.type !== 'basic' || trigger.entity !== mutation.entity || !fires(trigger, mutation)) continue
    fired.push({ trigger: name, target: trigger.target, priority: trigger.priority ?? 0, payload: payloadOf(name, mutation) })
  }
  return fired
}

function fires(trigger: BasicTrigger, m: Mutation): boolean {
  switch (m.operation) {
    case 'create': return trigger.create
    case 'delete': return trigger.delete
    case 'update': {
      if (trigger.update === false) return false
      const values = m.values ?? {}
      // `update: true` listens to every field; a list to those fields. Upstream fires when one of them changed.
      const fields = trigger.update === true ? Object.keys(values) : trigger.update
      return fields.some(f => Object.hasOwn(values, f) && (m.old === undefined || !jsonEqual(values[f], m.old[f])))
    }
  }
}

function payloadOf(trigger: string, m: Mutation): JsonObject {
  switch (m.operation) {
    case 'create': return { trigger, operation: 'create', entity: m.entity, id: m.id, values: m.values ?? {} }
    case 'update': return { trigger, operation: 'update', entity: m.entity, id: m.id, values: m.values ?? {}, ...(m.old ? { old: m.old } : {}) }
    case 'delete': return { trigger, operation: 'delete', entity: m.entity, id: m.id }
  }
}

// Upstream compares column values with `!==`; JSON values compare by content. Depth is bounded by validation.
function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (isArray(a) || isArray(b)) {
    if (!isArray(a) || !isArray(b) || a.length !== b.length) return false
    return a.every((v, i) => jsonEqual(v, b[i]))
  }
  const ka = Object.keys(a)
  return ka.length === Object.keys(b).length && ka.every(k => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]))
}

// Array.isArray does not narrow readonly arrays.
const isArray = (v: JsonValue): v is JsonArray => Array.isArray(v)

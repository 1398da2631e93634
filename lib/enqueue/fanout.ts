import type { ActionsSchema, BasicTrigger } from '../schema/actions.js'
import type { JsonArray, JsonObject, JsonValue } from '../schema/json.js'
import type { Mutation } from '../schema/payload.js'

// Mutations in, triggers out: the basic-trigger rules of upstream's TriggerListenersBuilder and
// TriggerHandler, for content APIs that do not know trigger names. Watch triggers need the content
// model to follow relations, so they still have to be named by the producer.

/** One trigger a mutation fires, with the payload upstream's TriggerPayloadBuilder would build for it. */
export type Fired = { trigger: string; target: string; priority: number; payload: JsonObject }

type Operation = Mutation['operation']
type Listener = { readonly name: string; readonly trigger: BasicTrigger }
/** A schema's basic triggers by entity, then by the operation they listen to; each list in schema order. */
type TriggerIndex = ReadonlyMap<string, Readonly<Record<Operation, readonly Listener[]>>>

// Built once per parsed schema, so a mutation meets only the triggers of its entity and operation (looping
// over every trigger per mutation took 10 s for 10,000 mutations against 5,000 triggers). lib/db/schemas.ts
// caches each stored schema parsed and frozen, so every enqueue of a project meets the same object; a
// weak key lets an index go with its schema.
const indexes = new WeakMap<ActionsSchema, TriggerIndex>()

/** The project's basic triggers the mutation fires, in schema order, each with its payload. */
export function fanOut(schema: ActionsSchema, mutation: Mutation): Fired[] {
  const fired: Fired[] = []
  for (const { name, trigger } of indexOf(schema).get(mutation.entity)?.[mutation.operation] ?? []) {
    if (mutation.operation === 'update' && !updateFires(trigger, mutation)) continue
    fired.push({ trigger: name, target: trigger.target, priority: trigger.priority ?? 0, payload: payloadOf(name, mutation) })
  }
  return fired
}

function indexOf(schema: ActionsSchema): TriggerIndex {
  const known = indexes.get(schema)
  if (known) return known
  const index = new Map<string, Record<Operation, Listener[]>>()
  // Object.entries' order is the schema order fanOut answers in.
  for (const [name, trigger] of Object.entries(schema.triggers)) {
    if (trigger.type !== 'basic') continue
    let byOperation = index.get(trigger.entity)
    if (!byOperation) index.set(trigger.entity, (byOperation = { create: [], update: [], delete: [] }))
    const listener = { name, trigger }
    if (trigger.create) byOperation.create.push(listener)
    if (trigger.delete) byOperation.delete.push(listener)
    if (trigger.update !== false) byOperation.update.push(listener)
  }
  indexes.set(schema, index)
  return index
}

// `update: true` listens to every field; a list to those fields. Upstream fires when one of them changed.
function updateFires(trigger: BasicTrigger, m: Extract<Mutation, { operation: 'update' }>): boolean {
  const values = m.values ?? {}
  const fields = trigger.update === true ? Object.keys(values) : trigger.update || []
  return fields.some(f => Object.hasOwn(values, f) && (m.old === undefined || !jsonEqual(values[f], m.old[f])))
}

function payloadOf(trigger: string, m: Mutation): JsonObject {
  switch (m.operation) {
    case 'create':
      return { trigger, operation: 'create', entity: m.entity, id: m.id, values: m.values ?? {} }
    case 'update':
      return { trigger, operation: 'update', entity: m.entity, id: m.id, values: m.values ?? {}, ...(m.old ? { old: m.old } : {}) }
    case 'delete':
      return { trigger, operation: 'delete', entity: m.entity, id: m.id }
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

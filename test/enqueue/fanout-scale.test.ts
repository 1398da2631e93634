import { beforeAll, describe, expect, it } from 'vitest'
import { getCurrentSchema, storeSchema } from '../../lib/db/schemas.js'
import { enqueueWithin } from '../../lib/enqueue/within.js'
import { useDatabase } from '../helpers/harness.js'
import { TX } from '../fixtures/schemas.js'

// Fan-out at the scale of a large content model: one request of 10,000 mutations against 5,000 basic
// triggers. How long it takes is measured in bench/ (the enqueue-fanout row), not asserted here.

const TRIGGERS = 5_000
const TARGETS = 4
const MUTATIONS = 10_000
/** Entities the mutations touch: the first half have a trigger, the second half none. */
const ENTITIES = 100
const name = (i: number) => `t${String(i).padStart(4, '0')}`

const db = useDatabase()
beforeAll(async () => {
  // Trigger i listens to Entity<i>: creates, updates of `title`, and deletes when i is even. One more trigger on
  // Entity0 comes last, after a watch trigger on it (never fired by a mutation), so schema order shows.
  const triggers: Record<string, unknown> = {}
  for (let i = 0; i < TRIGGERS; i++) {
    triggers[name(i)] = {
      type: 'basic',
      name: name(i),
      target: `hook${i % TARGETS}`,
      entity: `Entity${i}`,
      create: true,
      delete: i % 2 === 0,
      update: ['title'],
    }
  }
  triggers.watch_entity0 = { type: 'watch', name: 'watch_entity0', target: 'hook0', entity: 'Entity0', watch: ['title'] }
  triggers.t_extra = {
    type: 'basic',
    name: 't_extra',
    target: 'hook1',
    entity: 'Entity0',
    create: true,
    delete: false,
    update: false,
    priority: 3,
  }
  const targets = Object.fromEntries(
    Array.from({ length: TARGETS }, (_, i) => [`hook${i}`, { type: 'webhook', name: `hook${i}`, url: `https://hooks.example.com/${i}` }]),
  )
  await storeSchema(db.pool, 'big', { targets, triggers })
})

type Spec = { trigger: number | undefined; op: 'create' | 'update changed' | 'update unchanged' | 'delete' }
const OPS: ReadonlyArray<Spec['op']> = ['create', 'update changed', 'update unchanged', 'delete']

// Mutation i touches entity slot i % 100 with the operation of its hundred; slot k < 50 is Entity<100k + k % 2>.
function spec(i: number): Spec {
  const slot = i % ENTITIES
  return { trigger: slot < ENTITIES / 2 ? slot * 100 + (slot % 2) : undefined, op: OPS[Math.floor(i / ENTITIES) % OPS.length] ?? 'create' }
}

function mutation(i: number) {
  const s = spec(i)
  const entity = s.trigger === undefined ? `Missing${i % ENTITIES}` : `Entity${s.trigger}`
  switch (s.op) {
    case 'create':
      return { operation: 'create', entity, id: i, values: { title: `T${i}` } }
    case 'update changed':
      return { operation: 'update', entity, id: i, values: { title: `new ${i}` }, old: { title: `old ${i}` } }
    // `body` is no listed field, and `title` did not change.
    case 'update unchanged':
      return { operation: 'update', entity, id: i, values: { title: 'same', body: 'new' }, old: { title: 'same', body: 'old' } }
    case 'delete':
      return { operation: 'delete', entity, id: i }
  }
}

/** The triggers mutation i fires, in schema order, by the rules the schema above states. */
function expectedTriggers(i: number): string[] {
  const { trigger, op } = spec(i)
  if (trigger === undefined) return []
  switch (op) {
    case 'create':
      return trigger === 0 ? [name(0), 't_extra'] : [name(trigger)]
    case 'update changed':
      return [name(trigger)]
    case 'update unchanged':
      return []
    case 'delete':
      return trigger % 2 === 0 ? [name(trigger)] : []
  }
}

describe('fan-out against a 5,000-trigger schema', () => {
  it('reads the schema parsed once, however large its stored text', async () => {
    const { rows } = await db.pool.query<{ chars: number }>(
      "SELECT length(schema::text) AS chars FROM actions_schema WHERE project = 'big'",
    )
    expect(rows[0]?.chars).toBeGreaterThan(256 * 1024)
    expect((await getCurrentSchema(db.pool, 'big'))?.schema).toBe((await getCurrentSchema(db.pool, 'big'))?.schema)
  })

  it('writes one event per fired trigger for 10,000 mutations in one request, in schema order, and lists the unmatched', async () => {
    const events = Array.from({ length: MUTATIONS }, (_, i) => ({ payload: mutation(i) }))
    const expected = Array.from({ length: MUTATIONS }, (_, i) => expectedTriggers(i))
    const total = expected.reduce((n, t) => n + t.length, 0)
    // 3,125 mutations fire, 25 of them (creates of Entity0) twice.
    expect(total).toBe(3_150)

    const result = await enqueueWithin(db.pool, { project: 'big', transactionId: TX, events })
    expect(result.written).toBe(total)
    expect(result.eventIds).toHaveLength(total)
    expect(result.unmatched).toEqual(expected.flatMap((t, i) => (t.length === 0 ? [i] : [])))

    const { rows } = await db.pool.query<{
      id: string
      trigger: string
      target: string
      priority: number
      payload: { id: number; operation: string; entity: string }
    }>("SELECT id, trigger, target, priority, payload FROM actions_event WHERE project = 'big'")
    expect(rows).toHaveLength(total)
    const byId = new Map(rows.map(r => [r.id, r]))
    // eventIds are in request order, each mutation's ids in the order its triggers fired.
    const fired = result.eventIds.map(id => byId.get(id))
    expect(fired.map(r => `${r?.payload.id} ${r?.trigger}`)).toEqual(expected.flatMap((t, i) => t.map(trigger => `${i} ${trigger}`)))
    for (const r of rows) {
      const i = r.trigger === 't_extra' ? 1 : Number(r.trigger.slice(1))
      expect(r.target).toBe(`hook${i % TARGETS}`)
      expect(r.priority).toBe(r.trigger === 't_extra' ? 3 : 0)
      expect(r.payload).toMatchObject({ ...mutation(r.payload.id), trigger: r.trigger })
    }
  })
})

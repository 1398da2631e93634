import { beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { getCurrentSchema, storeSchema } from '../../lib/db/schemas.js'
import { derivedId } from '../../lib/enqueue/within.js'
import { enqueue } from '../../lib/enqueue.js'
import { useHarness } from '../helpers/harness.js'
import { TX } from '../fixtures/schemas.js'

// Fixtures are shapes upstream accepts (`Actions.Schema`) and builds (`ActionsPayload`, TriggerPayloadBuilder).
const upstreamSchema = {
  targets: {
    hook: {
      type: 'webhook',
      name: 'hook',
      url: 'https://{{HOST}}/hook',
      headers: { Authorization: 'Bearer {{TOKEN}}', 'User-Agent': 'mine' },
      body: { options: { a: 1 } },
      payloadPath: ['payload', 'json'],
      timeoutMs: 5000,
      maxAttempts: 3,
      initialRepeatIntervalMs: 1000,
      batchSize: 10,
    },
    bare: { type: 'webhook', name: 'bare', url: '{{URL}}', payloadPath: [] },
  },
  triggers: {
    title_changed: {
      type: 'basic',
      name: 'title_changed',
      entity: 'Article',
      create: false,
      delete: false,
      update: ['title'],
      target: 'hook',
      selection: ['id', 'title', ['author', {}, ['name']]],
      priority: -2147483648,
    },
    any_change: {
      type: 'basic',
      name: 'any_change',
      entity: 'Article',
      create: true,
      delete: true,
      update: true,
      target: 'bare',
      priority: 2147483647,
    },
    other_entity: { type: 'basic', name: 'other_entity', entity: 'Author', create: true, delete: true, update: true, target: 'bare' },
    tags: {
      type: 'watch',
      name: 'tags',
      entity: 'Article',
      watch: ['title', ['tags', { limit: 5 }, ['name']]],
      withNodes: true,
      target: 'hook',
      selection: ['id'],
    },
  },
}

const env = useHarness()
beforeAll(async () => {
  await storeSchema(env.db.pool, 'up', upstreamSchema)
})
beforeEach(async () => {
  await env.db.pool.query('DELETE FROM actions_event')
})
const stored = async () =>
  (await env.db.pool.query('SELECT id, trigger, target, priority, payload FROM actions_event ORDER BY created_at, trigger')).rows

describe('upstream schemas', () => {
  it('are stored and read back unchanged', async () => {
    expect((await getCurrentSchema(env.db.pool, 'up'))?.schema).toEqual(upstreamSchema)
    const { rows } = await env.db.pool.query(`SELECT schema FROM actions_schema WHERE project = 'up'`)
    expect(rows[0].schema).toEqual(upstreamSchema)
  })
})

describe('upstream payloads', () => {
  const payloads: Array<[string, string, Record<string, unknown>]> = [
    [
      'a basic create with its trigger and selection',
      'any_change',
      { trigger: 'any_change', operation: 'create', entity: 'Article', id: 'a1', values: { title: 'T' }, selection: { id: 'a1' } },
    ],
    [
      'a basic update with old values',
      'title_changed',
      { trigger: 'title_changed', operation: 'update', entity: 'Article', id: 7, values: { title: 'B' }, old: { title: 'A' } },
    ],
    ['a basic delete', 'any_change', { trigger: 'any_change', operation: 'delete', entity: 'Article', id: 'a1' }],
    [
      'a watch event whose base events carry nodes and path',
      'tags',
      {
        operation: 'watch',
        trigger: 'tags',
        entity: 'Article',
        id: 'a1',
        selection: { id: 'a1' },
        events: [
          {
            operation: 'update',
            entity: 'Tag',
            id: 't1',
            values: { name: 'x' },
            old: { name: 'y' },
            path: ['tags'],
            nodes: [{ relation: 'tags', entity: 'Tag', id: 't1' }],
          },
          { operation: 'junction_connect', entity: 'Article', relation: 'tags', id: 'a1', inverseId: 't2', path: [] },
          { operation: 'junction_disconnect', entity: 'Article', relation: 'tags', id: 'a1', inverseId: 't3' },
        ],
      },
    ],
    [
      'a basic payload carrying nodes',
      'any_change',
      { trigger: 'any_change', operation: 'create', entity: 'Article', id: 1, values: {}, nodes: [{ relation: 'r', entity: 'E', id: 2 }] },
    ],
  ]
  for (const [what, trigger, payload] of payloads) {
    it(`accepts ${what} and stores it as sent`, async () => {
      await enqueue(env.deps, { project: 'up', transactionId: TX, events: [{ trigger, payload }] })
      expect((await stored()).map(r => r.payload)).toEqual([payload])
    })
  }

  it('rejects a payload naming another trigger than its event', async () => {
    await expect(
      enqueue(env.deps, {
        project: 'up',
        transactionId: TX,
        events: [{ trigger: 'any_change', payload: { trigger: 'tags', operation: 'delete', entity: 'Article', id: 1 } }],
      }),
    ).rejects.toThrow(/events\.0\.payload\.trigger/)
    expect(await stored()).toEqual([])
  })
})

describe('mutations without a trigger name', () => {
  const mutate = (payload: Record<string, unknown>, id?: string) =>
    enqueue(env.deps, { project: 'up', transactionId: TX, events: [{ ...(id ? { id } : {}), payload }] })
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    [
      'a create fires the create triggers of its entity',
      { operation: 'create', entity: 'Article', id: 1, values: { title: 'T' } },
      ['any_change'],
    ],
    ['a delete fires the delete triggers of its entity', { operation: 'delete', entity: 'Author', id: 1 }, ['other_entity']],
    [
      'an update of a listed field that changed fires both',
      { operation: 'update', entity: 'Article', id: 1, values: { title: 'B' }, old: { title: 'A' } },
      ['any_change', 'title_changed'],
    ],
    [
      'an update of a listed field without old values fires both',
      { operation: 'update', entity: 'Article', id: 1, values: { title: 'B' } },
      ['any_change', 'title_changed'],
    ],
    [
      'an update of another field fires only update: true',
      { operation: 'update', entity: 'Article', id: 1, values: { body: 'x' }, old: { body: 'y' } },
      ['any_change'],
    ],
    [
      'an update that changed nothing fires nothing',
      { operation: 'update', entity: 'Article', id: 1, values: { title: 'A', tags: [1] }, old: { title: 'A', tags: [1] } },
      [],
    ],
    ['a mutation of an entity no trigger watches fires nothing', { operation: 'create', entity: 'Comment', id: 1, values: {} }, []],
  ]
  for (const [what, mutation, triggers] of cases) {
    it(what, async () => {
      const res = await mutate(mutation)
      const rows = await stored()
      expect(rows.map(r => r.trigger).sort()).toEqual(triggers)
      expect(res.eventIds).toHaveLength(triggers.length)
      expect(res.unmatched).toEqual(triggers.length ? [] : [0])
      expect(res.written).toBe(triggers.length)
      for (const r of rows) {
        expect(r.payload).toEqual({
          trigger: r.trigger,
          ...mutation,
          ...(mutation.operation === 'delete' ? {} : { values: mutation.values ?? {} }),
        })
        const t = upstreamSchema.triggers[r.trigger as keyof typeof upstreamSchema.triggers]
        expect([r.target, r.priority]).toEqual([t.target, 'priority' in t ? t.priority : 0])
      }
    })
  }

  it('derives one id per fired trigger from the producer id, so a retry writes nothing twice', async () => {
    const id = '0b8f6f7e-5a8c-4e57-9a5e-4c1f8f0e7d11'
    const m = { operation: 'update', entity: 'Article', id: 1, values: { title: 'B' } }
    const first = await mutate(m, id)
    expect(first.eventIds.sort()).toEqual([derivedId('up', id, 'any_change'), derivedId('up', id, 'title_changed')].sort())
    expect((await mutate(m, id)).written).toBe(0)
    expect(await stored()).toHaveLength(2)
  })
})

import { describe, expect, it } from 'vitest'
import { MAX_READ_PAYLOAD_BYTES, sortRows } from '../../lib/relay/move.js'
import type { OutboxRow } from '../../lib/relay/outbox.js'
import { parseActionsSchema } from '../../lib/schema/actions.js'
import { MAX_PAYLOAD_BYTES } from '../../lib/schema/limits.js'

const schema = parseActionsSchema({
  targets: {
    hook: { type: 'webhook', name: 'hook', url: 'http://127.0.0.1:9/' },
    loose: { type: 'webhook', name: 'loose', url: 'http://127.0.0.1:9/', ordering: 'none' },
  },
  triggers: {
    t: { type: 'basic', name: 't', entity: 'Article', create: true, delete: false, update: false, target: 'hook' },
    u: { type: 'basic', name: 'u', entity: 'Article', create: true, delete: false, update: false, target: 'loose' },
  },
})

/** A row whose payload serializes to exactly `bytes` bytes. */
function rowOf(bytes: number, over: Partial<OutboxRow> = {}): OutboxRow {
  const shell = { operation: 'create', entity: 'Article', id: 'a1', values: { title: '' } }
  const pad = bytes - Buffer.byteLength(JSON.stringify(shell))
  const payloadJson = JSON.stringify({ ...shell, values: { title: 'x'.repeat(pad) } })
  return {
    id: '00000000-0000-4000-8000-000000000001',
    transactionId: '00000000-0000-4000-8000-000000000002',
    createdAt: new Date(0),
    stage: 'live',
    target: 'hook',
    trigger: 't',
    priority: 0,
    payloadJson,
    payloadBytes: Buffer.byteLength(payloadJson),
    ...over,
  }
}

describe('which outbox rows the relay takes', () => {
  it('takes a payload of exactly the bound and refuses one byte more, saying how large it is', () => {
    expect(sortRows([rowOf(MAX_PAYLOAD_BYTES)], 'p', schema).events).toHaveLength(1)
    const { events, refused } = sortRows([rowOf(MAX_PAYLOAD_BYTES + 1)], 'p', schema)
    expect(events).toEqual([])
    expect(refused[0]?.reason).toBe(`payload of ${MAX_PAYLOAD_BYTES + 1} bytes serialized, expected at most ${MAX_PAYLOAD_BYTES}`)
  })

  it('refuses without parsing a payload whose database text is past twice the bound', () => {
    const { refused } = sortRows([{ ...rowOf(100), payloadJson: '', payloadBytes: MAX_READ_PAYLOAD_BYTES + 1 }], 'p', schema)
    expect(refused[0]?.reason).toBe(`payload of about ${MAX_READ_PAYLOAD_BYTES + 1} bytes, expected at most ${MAX_PAYLOAD_BYTES}`)
  })

  it('refuses unknown targets and triggers, and a payload naming no entity, and takes the rows beside them', () => {
    const rows = [
      rowOf(100, { id: '00000000-0000-4000-8000-00000000000a', target: 'gone' }),
      rowOf(100, { id: '00000000-0000-4000-8000-00000000000b', trigger: 'gone' }),
      rowOf(100, { id: '00000000-0000-4000-8000-00000000000c', payloadJson: '[1]', payloadBytes: 3 }),
      rowOf(100, { id: '00000000-0000-4000-8000-00000000000d' }),
    ]
    const { events, refused } = sortRows(rows, 'p', schema)
    expect(events.map(e => e.id)).toEqual(['00000000-0000-4000-8000-00000000000d'])
    expect(refused.map(r => r.reason)).toEqual([
      'target gone is not in the current actions schema',
      'trigger gone is not in the current actions schema',
      'payload names no entity and id (expected an object with a string entity and a string or number id)',
    ])
  })

  it('refuses every row of a project Actions has no schema for', () => {
    expect(sortRows([rowOf(100)], 'p', undefined).refused[0]?.reason).toMatch(/^project p has no actions schema in Actions/)
  })

  it('keeps the ordering key for an ordered target and none for an unordered one', () => {
    const { events } = sortRows([rowOf(100), rowOf(100, { target: 'loose', trigger: 'u' })], 'p', schema)
    expect(events[0]?.orderKey).toMatch(/^[0-9a-f-]{36}$/)
    expect(events[1]?.orderKey).toBeNull()
  })
})

// The request body is spliced from the payload's jsonb text: its bytes must be exactly what
// JSON.stringify of upstream's shape (`{ meta, ...payload }` with the parsed payload) gives, for any
// payload Postgres can store, under any body template. Postgres itself writes the text, as in a claim.
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import type { ClaimedEvent } from '../../lib/events.js'
import { PayloadPathError, requestBodyText } from '../../lib/delivery/template.js'
import { compactJsonb } from '../../lib/delivery/jsonb.js'
import { jsDateText, utcText } from '../../lib/db/claim.js'
import type { WebhookTarget } from '../../lib/schema/actions.js'
import { upstreamBody } from '../helpers/delivery.js'

/** Payload characters past which requestBodyText builds a Buffer (LARGE_BODY_CHARS in lib/delivery/template.ts). */
const LARGE_BODY_CHARS = 1 << 20

let db: pg.Pool
// The run's Postgres (DATABASE_URL or the embedded one the harness started): only its jsonb text is used.
beforeAll(() => {
  db = new pg.Pool({ connectionString: inject('pgAdminUrl'), max: 1 })
})
afterAll(async () => {
  await db.end()
})

const PAYLOADS: Array<[string, string]> = [
  ['empty', '{}'],
  ['flat', '{"operation":"create","entity":"Article","id":1,"values":{"title":"Article 1"}}'],
  [
    'unicode and escapes',
    '{"t":"žluťoučký kůň 🐎 \\u2028 \\u00e9 \\" \\\\ \\/ \\n\\t\\r\\b\\f \\u0001 \\u001f ,: {[","\\"k\\\\":"a\\\\\\"b"}',
  ],
  ['nested', '{"values":{"a":{"b":[1,{"c":[],"d":{}},[[]],"x, y: z"]},"list":[true,false,null]},"op":"update"}'],
  [
    'numbers',
    '{"a":1.5,"b":-0,"c":1e21,"d":1.5e-7,"e":12345678901234567890,"f":0.1,"g":-12,"h":1.0,"i":100,"j":1e400,"k":[1e-7, 2.50, 9007199254740993]}',
  ],
  ['a meta key', '{"meta":{"mine":true},"id":2,"z":1}'],
  ['a nested meta key', '{"values":{"meta":1},"id":3}'],
  ['integer-like keys', '{"b":1,"10":2,"2":3,"a":{"7":1,"x":2,"11":3}}'],
  ['a nested integer-like key', '{"a":{"01":1,"b":2}}'],
  ['duplicate keys', '{"a":1,"a":2,"bb":[1,2]}'],
  ['__proto__ and constructor keys', '{"__proto__":{"x":1},"constructor":"c","toString":1}'],
  ['spaces in keys and values', '{"a b": "c : d, e", "": ""}'],
]

/** A claimed row as the claim selects it, from a payload Postgres stored and writes back as text. */
async function claimed(json: string, i: number): Promise<{ row: ClaimedEvent; parsed: unknown; createdAt: Date; changedAt: Date }> {
  const { rows } = await db.query<{ text: string; parsed: unknown; created: Date; created_text: string }>(
    `SELECT $1::jsonb::text AS text, $1::jsonb AS parsed, t AS created,
            ${utcText('t')} AS created_text
     FROM (SELECT $2::timestamptz AS t) x`,
    [json, `2024-02-29 23:59:59.${String(999_999 - i * 37).padStart(6, '0')}+00`],
  )
  const r = rows[0]
  if (!r) throw new Error('no row')
  const row: ClaimedEvent = {
    id: `0f8fad5b-d9cb-469f-a165-70867728950${i % 10}`,
    transaction_id: '7f1b6a8e-3b1c-4a55-9d63-0c3f1d2e4a10',
    num_retries: i,
    target: 'hook "x"',
    trigger: 'to_t',
    identity_id: null,
    ip_address: '10.0.0.1',
    user_agent: 'Mozilla/5.0 "quoted" ž',
    lease: '2024-03-01 00:00:00+00',
    created_at: jsDateText(r.created_text),
    last_state_change: jsDateText(r.created_text),
    payload: r.text,
  }
  return { row, parsed: r.parsed, createdAt: r.created, changedAt: r.created }
}

/** What the body held before: the parsed payload spread after a meta whose timestamps are Dates. */
function oldShape({ row, parsed, createdAt, changedAt }: Awaited<ReturnType<typeof claimed>>) {
  return {
    meta: {
      eventId: row.id,
      transactionId: row.transaction_id,
      identityId: row.identity_id,
      ipAddress: row.ip_address,
      userAgent: row.user_agent,
      createdAt,
      lastStateChange: changedAt,
      numRetries: row.num_retries,
      trigger: row.trigger,
      target: row.target,
    },
    ...(parsed as object),
  }
}

const target = (t: Partial<WebhookTarget>): WebhookTarget => ({ type: 'webhook', name: 'hook', url: 'http://x', ...t })

describe('the spliced request body', () => {
  it.each(PAYLOADS.map(([name, json], i) => [name, json, i] as const))(
    'is byte for byte JSON.stringify of { meta, ...payload } for %s',
    async (_, json, i) => {
      const event = await claimed(json, i)
      expect(requestBodyText(target({}), [event.row])).toBe(`{"events":[${JSON.stringify(oldShape(event))}]}`)
    },
  )

  it('formats timestamps exactly as JSON.stringify writes the Date node-postgres reads', async () => {
    for (const [i] of PAYLOADS.entries()) {
      const event = await claimed('{}', i)
      expect(event.row.created_at).toBe(event.createdAt.toISOString())
    }
  })

  it.each([
    '2024-02-29 23:59:59.999999+00',
    '2024-03-01 00:00:00+00',
    '2024-03-01 00:00:00.5+00',
    '2024-03-01 00:00:00.12+00',
    '2024-03-01 00:00:00.000001+00',
    '2024-03-01 00:00:00.0015+00',
    '2024-03-01 01:30:00.25+05:30',
    '0999-12-31 23:59:59.9999+00',
  ])('formats %s (Postgres drops trailing zeros of the fraction) as the Date node-postgres reads', async literal => {
    const { rows } = await db.query<{ date: Date; text: string }>(
      `SELECT t AS date, ${utcText('t')} AS text FROM (SELECT $1::timestamptz AS t) x`,
      [literal],
    )
    const r = rows[0]
    if (!r) throw new Error('no row')
    expect(jsDateText(r.text)).toBe(r.date.toISOString())
  })

  it('leaves text of another shape as it is', () => {
    expect(jsDateText('infinity')).toBe('infinity')
    expect(jsDateText('0044-03-15 12:00:00 BC')).toBe('0044-03-15 12:00:00 BC')
  })

  it.each([
    ['no template', {}],
    ['an empty payloadPath', { payloadPath: [] }],
    ['a template and a path', { body: { options: 1, payload: { keep: 'x' }, z: [1] }, payloadPath: ['payload', 'json'] }],
    ['a template already holding events', { body: { data: { events: 'old', after: 1 } }, payloadPath: ['data'] }],
    ['a template with awkward keys', { body: { '2': 'two', 'a "q"': { __proto__: 1 } }, payloadPath: ['a "q"'] }],
  ])('builds the whole body as upstream serializes it, with %s', async (_, t) => {
    const events = await Promise.all(PAYLOADS.map(([, json], i) => claimed(json, i)))
    const tgt = target(t)
    expect(
      requestBodyText(
        tgt,
        events.map(e => e.row),
      ),
    ).toBe(upstreamBody(tgt, events.map(oldShape)))
    expect(requestBodyText(tgt, [])).toBe(upstreamBody(tgt, []))
    // Once more from the target's cached template.
    expect(
      requestBodyText(
        tgt,
        events.slice(0, 1).map(e => e.row),
      ),
    ).toBe(upstreamBody(tgt, events.slice(0, 1).map(oldShape)))
  })

  it('assembles a batch larger than LARGE_BODY_CHARS as a Buffer holding the same bytes', async () => {
    const big = await claimed(JSON.stringify({ operation: 'create', blob: 'ž'.repeat(LARGE_BODY_CHARS / 2) }), 0)
    const events = [big, ...(await Promise.all(PAYLOADS.map(([, json], i) => claimed(json, i)))), big]
    const tgt = target({ body: { options: 1 }, payloadPath: ['payload'] })
    const body = requestBodyText(
      tgt,
      events.map(e => e.row),
    )
    expect(Buffer.isBuffer(body)).toBe(true)
    expect(body.toString()).toBe(upstreamBody(tgt, events.map(oldShape)))
  })

  it('throws PayloadPathError for a path through a value that is not an object, every time', async () => {
    const tgt = target({ body: { data: 5 }, payloadPath: ['data', 'x'] })
    const { row } = await claimed('{}', 0)
    expect(() => requestBodyText(tgt, [row])).toThrow(PayloadPathError)
    expect(() => requestBodyText(tgt, [row])).toThrow(PayloadPathError)
  })

  it('leaves payloads the spread would reorder or override to the object path', () => {
    expect(compactJsonb('{"meta": 1}')).toBeUndefined()
    expect(compactJsonb('{"a": {"1": 2}}')).toBeUndefined()
    expect(compactJsonb('{"a": {"meta": 1}}')).toBe('{"a":{"meta":1}}')
  })
})

// Array parameters built as literals (lib/db/arrays.ts) must reach Postgres as the very values
// node-postgres would have sent: each type the statements use, with the strings array input treats
// specially.
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { arrayLiteral, type ArrayElement } from '../../lib/db/arrays.js'

let db: pg.Pool
beforeAll(() => { db = new pg.Pool({ connectionString: inject('pgAdminUrl'), max: 1 }) })
afterAll(async () => { await db.end() })

/** The array Postgres reads from the literal, and the one it reads from node-postgres' own conversion. */
async function both(type: string, values: ArrayElement[]): Promise<{ literal: unknown; native: unknown }> {
  const { rows } = await db.query(`SELECT $1::${type}[] AS literal, $2::${type}[] AS native`, [arrayLiteral(values), values])
  return rows[0]
}

const AWKWARD = ['', 'NULL', 'null', 'a,b', '{x}', '{', '}', ' lead and trail ', 'q"uote', 'back\\slash', '\\"', '"', '\\',
  'tab\there', 'new\nline', 'žluťoučký 🐎', "it's", 'a b', 'ARRAY[1]']

describe('an array literal', () => {
  it('reads back as the same strings, however awkward', async () => {
    const { literal, native } = await both('text', [...AWKWARD, null, undefined])
    expect(literal).toEqual([...AWKWARD, null, null])
    expect(literal).toEqual(native)
  })

  it('reads back as the same uuids, booleans and integers', async () => {
    const uuids = ['0f8fad5b-d9cb-469f-a165-70867728950e', '7f1b6a8e-3b1c-4a55-9d63-0c3f1d2e4a10', null]
    expect((await both('uuid', uuids)).literal).toEqual(uuids)
    expect((await both('bool', [true, false, null])).literal).toEqual([true, false, null])
    const ints = [0, -1, 2_147_483_647, -2_147_483_648, null]
    const r = await both('int', ints)
    expect(r.literal).toEqual(ints)
    expect(r.literal).toEqual(r.native)
  })

  it('reads back as the same float8 values, the special ones included', async () => {
    const floats = [0, 1.5, -2.25, 1e-7, 1.5e300, 0.1, Number.MAX_VALUE, Number.MIN_VALUE, Infinity, -Infinity, NaN, null]
    const r = await both('float8', floats)
    // node-postgres returns float8 as a JS number: every value survives exactly.
    expect(r.literal).toEqual(floats)
    expect(r.literal).toEqual(r.native)
  })

  it('reads back as the same instants for Dates', async () => {
    const dates = [new Date('2024-02-29T23:59:59.999Z'), new Date(0), new Date('0999-01-01T00:00:00.001Z'), null]
    const r = await both('timestamptz', dates)
    expect(r.literal).toEqual(dates)
    expect(r.literal).toEqual(r.native)
  })

  it('passes Postgres\' own timestamptz text through exactly', async () => {
    const { rows } = await db.query(`SELECT (now() + interval '0.000123 second')::text AS t`)
    const text = rows[0].t as string
    const { rows: back } = await db.query('SELECT ($1::timestamptz[])[1] = $2::timestamptz AS same, ($1::timestamptz[])[1]::text AS text', [arrayLiteral([text]), text])
    expect(back[0]).toEqual({ same: true, text })
  })

  it('reads back as the same jsonb, quotes and backslashes inside', async () => {
    const entries = [JSON.stringify({ ok: false, errorMessage: 'said "no" \\ twice', response: '{"a":[1,"b"]}' }), null, '{}']
    const r = await both('jsonb', entries)
    expect(r.literal).toEqual([JSON.parse(entries[0] ?? ''), null, {}])
    expect(r.literal).toEqual(r.native)
  })

  it('is {} for no values, an empty array', async () => {
    expect(arrayLiteral([])).toBe('{}')
    expect((await both('text', [])).literal).toEqual([])
  })
})

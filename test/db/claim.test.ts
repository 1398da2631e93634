import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLAIM_SQL } from '../../lib/db/claim.js'
import { HAS_DUE_SQL } from '../../lib/db/due.js'
import { freshDatabase } from '../helpers/db.js'

// One project whose one target holds a deep due backlog behind many more resolved events, with
// statistics that know it. The claim's paused-target filter must not hide the backlog from the planner
// (an unestimable `target <> ALL(...)` once turned every claim into a sequential scan and sort of the
// whole backlog: 38 ms instead of 1 ms), and "is anything due" must not scan the resolved rows first.
let db: Awaited<ReturnType<typeof freshDatabase>>

beforeAll(async () => {
  db = await freshDatabase()
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb, 'succeed', now()
    FROM generate_series(1, 100000) AS i`)
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', jsonb_build_object('id', i)
    FROM generate_series(1, 20000) AS i`)
  await db.pool.query('ANALYZE actions_event')
}, 120_000)
afterAll(async () => { await db.drop() })

const plan = async (sql: string, params: unknown[]) =>
  (await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)).rows.map(r => r['QUERY PLAN']).join('\n')

describe('the claim and due statements on one deep project', () => {
  it('reads a deep single-target backlog from the due index, in order, without sorting it', async () => {
    const p = await plan(CLAIM_SQL, ['p', ['t'], [1], [60_000], 128, 128, [], 64e6, 1, [16]])
    // Unaliased: the candidates' scan; `d`: the probe check, run only while a target is paused.
    expect(p).toMatch(/Index Scan using actions_event_due_idx on actions_event {2}\(/)
    expect(p).toMatch(/(Index Scan using actions_event_due_idx on|Bitmap Heap Scan on) actions_event d\b/)
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it('answers "is anything due" from the due index, not by scanning the resolved rows first', async () => {
    const p = await plan(HAS_DUE_SQL, ['p', []])
    expect(p).toMatch(/Index (Only )?Scan using actions_event_due_idx/)
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })
})

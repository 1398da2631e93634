import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLAIM_SQL } from '../../lib/db/claim.js'
import { freshDatabase } from '../helpers/db.js'

// One project whose one target holds a deep due backlog, with statistics that know it: the claim's
// paused-target filter must not hide that from the planner (an unestimable `target <> ALL(...)` once
// turned every claim into a sequential scan and sort of the whole backlog: 38 ms instead of 1 ms).
let db: Awaited<ReturnType<typeof freshDatabase>>

beforeAll(async () => {
  db = await freshDatabase()
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', jsonb_build_object('id', i)
    FROM generate_series(1, 20000) AS i`)
  await db.pool.query('ANALYZE actions_event')
}, 120_000)
afterAll(async () => { await db.drop() })

describe('the claim statement', () => {
  it('reads a deep single-target backlog from the due index, in order, without sorting it', async () => {
    const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${CLAIM_SQL}`, ['p', ['t'], [1], [60_000], 128, 128, [], 64e6, 1, [16]])
    const plan = rows.map(r => r['QUERY PLAN']).join('\n')
    // Unaliased: the candidates' scan (the probe check's own scan is aliased `d` and runs only while a target is paused).
    expect(plan).toMatch(/Index Scan using actions_event_due_idx on actions_event {2}\(/)
    expect(plan).not.toMatch(/Seq Scan on actions_event {2}\(/)
  })
})

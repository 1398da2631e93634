import type pg from 'pg'
import { beforeAll, describe, expect, it } from 'vitest'
import { CLAIM_SQL } from '../../lib/db/claim.js'
import { HAS_DUE, msUntilNextDue, NEXT_DUE } from '../../lib/db/due.js'
import { useDatabase } from '../helpers/harness.js'

// One project whose one target holds a deep due backlog behind many more resolved events, with
// statistics that know it. The claim's paused-target filter must not hide the backlog from the planner
// (an unestimable `target <> ALL(...)` once turned every claim into a sequential scan and sort of the
// whole backlog: 38 ms instead of 1 ms), and "is anything due" must not scan the resolved rows first.
const db = useDatabase()

/** `n` due events of project p's target t, each payload `{"id": i}`. */
const insertDue = (pool: Pick<pg.Pool, 'query'>, n: number) =>
  pool.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', jsonb_build_object('id', i)
     FROM generate_series(1, $1::int) AS i`,
    [n],
  )

beforeAll(async () => {
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb, 'succeed', now()
    FROM generate_series(1, 100000) AS i`)
  await insertDue(db.pool, 20_000)
  await db.pool.query('ANALYZE actions_event')
}, 120_000)

type PlanNode = { 'Node Type': string; 'Actual Loops'?: number; Plans?: PlanNode[] }
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

const plan = async (sql: string, params: unknown[]) =>
  (await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)).rows.map(r => r['QUERY PLAN']).join('\n')

describe('the claim and due statements on one deep project', () => {
  it('reads a deep single-target backlog from the due index, in order, without sorting it', async () => {
    const p = await plan(CLAIM_SQL, ['p', ['t'], [1], [60_000], 128, 128, [], 64e6, 1, [16], [10]])
    // Unaliased: the candidates' scan; `d`: the probe check, run only while a target is paused.
    expect(p).toMatch(/Index Scan using actions_event_due_idx on actions_event {2}\(/)
    expect(p).toMatch(/(Index Scan using actions_event_due_idx on|Bitmap Heap Scan on) actions_event d\b/)
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it('answers "is anything due" from the due index, not by scanning the resolved rows first', async () => {
    const p = await plan(HAS_DUE.text, ['p', []])
    expect(p).toMatch(/Index (Only )?Scan using actions_event_due_idx/)
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it('answers "when is the next event due" with one probe of the due index while something is due now', async () => {
    expect(await msUntilNextDue(db.pool, 'p')).toBe(0)
    const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${NEXT_DUE.text}`, [
      'p',
      [],
    ])
    const all = nodes(rows[0]!['QUERY PLAN'][0]!.Plan)
    // The minimum over every waiting event (20,000 here) is never computed.
    const aggregates = all.filter(n => n['Node Type'] === 'Aggregate')
    expect(aggregates.length).toBeGreaterThan(0)
    expect(aggregates.map(n => n['Actual Loops'])).toEqual(aggregates.map(() => 0))
  })
})

// Statistics taken while the queue was empty (a fresh deployment, or the bench's VACUUM ANALYZE before
// its load) make the planner expect one candidate, and a cached generic plan keeps that belief while
// hundreds of rows are due. Whatever it then picks, no step may run once per candidate: joining the
// rows back to the list of batches once became a nested loop that recomputed that list per row
// (quadratic: 27 ms per claim under load, 40 ms for 128 rows).
describe('the claim on statistics of an empty queue', () => {
  const fresh = useDatabase()
  beforeAll(async () => {
    await fresh.pool.query('VACUUM ANALYZE actions_event')
    await fresh.pool.query(`
      INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
      SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, CASE WHEN i % 3 = 0 THEN 'u' ELSE 't' END, 'x', jsonb_build_object('id', i)
      FROM generate_series(1, 400) AS i`)
  }, 60_000)

  it('runs every window, sort and aggregate once, with the generic plan', async () => {
    const client = await fresh.pool.connect()
    try {
      await client.query('BEGIN')
      await client.query(`SET LOCAL plan_cache_mode = force_generic_plan`)
      const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${CLAIM_SQL}`, [
        'p',
        ['t', 'u'],
        [1, 5],
        [60_000, 60_000],
        200,
        128,
        [],
        64e6,
        1,
        [128, 16],
        [10, 10],
      ])
      const all = nodes(rows[0]!['QUERY PLAN'][0]!.Plan)
      // The claim took rows: the plan ran for real (EXPLAIN ANALYZE executes the UPDATE; rolled back below).
      expect(all[0]!['Node Type']).toBe('ModifyTable')
      const repeated = all.filter(n => ['WindowAgg', 'Sort', 'Aggregate', 'Limit'].includes(n['Node Type']) && (n['Actual Loops'] ?? 1) > 1)
      expect(repeated.map(n => `${n['Node Type']} x${n['Actual Loops']}`)).toEqual([])
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  })
})

// Statistics taken while a few keys held every event (a warm-up, a quiet hour) once let the planner
// answer the per-entity probe ("is an earlier event of this key unresolved?") from the due index,
// reading the project's whole backlog for each candidate: 11 ms per claim here, seconds at 5,000
// events/s. The probe must read the key index whatever the statistics say (migration 016).
describe('the per-entity probe on statistics of a few keys', () => {
  const stale = useDatabase()
  const keyed = (n: number, keys: number, state: string) => `
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, order_key, state, resolved_at)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb, md5('k' || (i % ${keys}))::uuid, '${state}',
           ${state === 'succeed' ? 'now()' : 'NULL'}
    FROM generate_series(1, ${n}) AS i`
  beforeAll(async () => {
    await stale.pool.query(keyed(2_000, 10, 'succeed'))
    await stale.pool.query('ANALYZE actions_event')
    // The backlog arrives after the statistics: 20,000 due events, each its own key.
    await stale.pool.query(keyed(20_000, 20_000, 'created'))
  }, 60_000)

  const probes = async (sql: string, params: unknown[], mode: string) => {
    const client = await stale.pool.connect()
    try {
      await client.query('BEGIN')
      await client.query(`SET LOCAL plan_cache_mode = ${mode}`)
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)
      // The probe's scan is the one on alias `k`.
      return rows.map(r => r['QUERY PLAN']).filter(l => / on actions_event k\b/.test(l))
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  }

  for (const mode of ['force_custom_plan', 'force_generic_plan']) {
    it(`reads the key index in the claim, "is anything due" and "next due" (${mode})`, async () => {
      const claim = await probes(CLAIM_SQL, ['p', ['t'], [1], [60_000], 8, 8, [], 64e6, 1, [8], [10]], mode)
      const hasDue = await probes(HAS_DUE.text, ['p', []], mode)
      const nextDue = await probes(NEXT_DUE.text, ['p', []], mode)
      for (const scans of [claim, hasDue, nextDue]) {
        expect(scans.length).toBeGreaterThan(0)
        for (const scan of scans) expect(scan).toMatch(/Index Scan using actions_event_key_idx on actions_event k\b/)
      }
    })
  }
})

// A table as small as a fresh deployment's or the bench's (20,000 due rows, no history) made the
// planner find the claimed rows again by a hash join over a sequential scan of the whole table: at
// batchSize 50 that was two thirds of each 800-row claim (17-39 ms). The claim updates each row where
// its candidate scan found and locked it, by its place in the heap, whatever the table's size.
describe('the claim on a small table', () => {
  const small = useDatabase()
  beforeAll(async () => {
    await insertDue(small.pool, 20_000)
    await small.pool.query('VACUUM ANALYZE actions_event')
  }, 60_000)

  it('updates the claimed rows where it locked them, with no scan of the table', async () => {
    const { rows } = await small.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${CLAIM_SQL}`, [
      'p',
      ['t'],
      [50],
      [60_000],
      800,
      16,
      [],
      64e6,
      1,
      [16],
      [10],
    ])
    const p = rows.map(r => r['QUERY PLAN']).join('\n')
    expect(p).toMatch(/Tid Scan on actions_event e\b/)
    expect(p).not.toMatch(/Seq Scan on actions_event e\b/)
  })
})

import { beforeAll, describe, expect, it } from 'vitest'
import { RECORD_OK_SQL, RECORD_SQL } from '../../lib/db/record.js'
import { RELEASE_SQL } from '../../lib/db/release.js'
import { useDatabase } from '../helpers/harness.js'

// The bench's shape: a modest table analyzed while nothing was claimed, then hundreds of events in flight.
const db = useDatabase()
let ids: string[] = []
let leases: Date[] = []

beforeAll(async () => {
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
    SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb FROM generate_series(1, 20000)`)
  await db.pool.query('VACUUM ANALYZE actions_event')
  const { rows } = await db.pool
    .query(`UPDATE actions_event SET state = 'processing', lease_until = date_trunc('milliseconds', now() + interval '1 minute')
    WHERE id IN (SELECT id FROM actions_event LIMIT 350) RETURNING id, lease_until`)
  ids = rows.map(r => r.id)
  leases = rows.map(r => r.lease_until)
}, 60_000)

// Every outcome a success of target t (the breaker's inputs: project, target, code, batch, attempts, no Retry-After).
const recordParamsFor = (ids: readonly string[], leases: readonly (Date | undefined)[]) => [
  ids,
  leases,
  ids.map(() => true),
  ids.map(() => null),
  ids.map(() => 10),
  ids.map(() => 5000),
  1e12,
  ids.map(() => 'p'),
  ids.map(() => 't'),
  ids.map(() => 200),
  ids.map((_, i) => i),
  ids.map(() => 0),
  ids.map(() => null),
  ids.map(() => null),
  3_600_000,
  5,
  0.9,
  60_000,
  30_000,
  900_000,
  0,
  true,
  ids.map(() => null),
  ids.map(() => null),
  ids.map(() => null),
]
const recordParams = () => recordParamsFor(ids, leases)

async function plan(sql: string, params: unknown[]): Promise<string> {
  const { rows } = await db.pool.query(`EXPLAIN ${sql}`, params)
  return rows.map(r => r['QUERY PLAN']).join('\n')
}

/** The plan of the UPDATE of actions_event (the record statement's health CTEs join a few rows per target, not per event). */
function updateNode(plan: string): string {
  const lines = plan.split('\n')
  const start = lines.findIndex(l => l.includes('Update on actions_event'))
  const indent = (l: string) => l.length - l.trimStart().replace(/^->\s*/, '').length
  const end = lines.findIndex((l, i) => i > start && indent(l) <= indent(lines[start] ?? ''))
  return lines.slice(start, end < 0 ? undefined : end).join('\n')
}

describe('recording many outcomes on a table analyzed while nothing was claimed', () => {
  it.each([
    ['record', () => plan(RECORD_SQL, recordParams())],
    [
      'record of successes',
      () => plan(RECORD_OK_SQL, [ids, leases, ['p'], ['t'], [350], 5, 0.9, 60_000, 30_000, 900_000, true, ids.map(() => 'p')]),
    ],
    ['release', () => plan(RELEASE_SQL, [ids, leases, 'p'])],
  ])('plans the %s statement without a nested loop over the outcomes', async (_, explain) => {
    const p = updateNode(await explain())
    // A nested loop here rescans every outcome for every claimed row: quadratic in the events in flight.
    expect(p).not.toContain('Nested Loop')
    expect(p).toMatch(/Hash Join|Merge Join/)
  })

  it('writes every outcome once', async () => {
    const { rowCount } = await db.pool.query(RECORD_SQL, recordParams())
    expect(rowCount).toBe(350)
  })
})

// A record of a batchSize 50 drain's outcomes (a few hundred) on a small table (the bench's 20,000 rows)
// made the planner hash the outcomes and scan the whole table for them, a plan every statistics refresh
// could bring back. The record reads each row through the primary key instead, whatever the table's size.
describe('recording outcomes on a small table', () => {
  it.each([50, 400, 1000])('reads the %i recorded rows by their ids, with no scan of the table', async n => {
    const some = ids.slice(0, Math.min(n, ids.length))
    const many = [...some, ...Array.from({ length: n - some.length }, () => crypto.randomUUID())]
    const lease = many.map((_, i) => leases[i % leases.length])
    for (const [sql, params] of [
      [RECORD_OK_SQL, [many, lease, ['p'], ['t'], [n], 5, 0.9, 60_000, 30_000, 900_000, true, many.map(() => 'p')]],
      [RECORD_SQL, recordParamsFor(many, lease)],
    ] as const) {
      const p = await plan(sql, [...params])
      expect(p).toMatch(/Tid Scan on actions_event e\b/)
      expect(p).toMatch(/Index Scan using actions_event_pkey on actions_event x\b/)
      expect(p).not.toMatch(/Seq Scan on actions_event/)
    }
  })
})

// The statements are prepared, and a cached generic plan expects ten outcomes: a TID list alone then
// became a nested loop that fetched every listed row once per outcome (quadratic: 350 outcomes, 122,500
// row reads; the bench's batchSize 50 drain fell from 4,300 to 570 events/s). Each outcome carries its
// own row's TID, so whatever the plan, each row is read once.
describe('the record of successes with its generic plan', () => {
  it('reads each recorded row once', async () => {
    const c = await db.pool.connect()
    const literal = (xs: readonly string[]) => c.escapeLiteral(`{${xs.map(x => `"${x}"`).join(',')}}`)
    try {
      await c.query(
        `PREPARE record_ok(uuid[], timestamptz[], text[], text[], int[], int, float8, int, int, int, bool, text[]) AS ${RECORD_OK_SQL}`,
      )
      await c.query('BEGIN')
      await c.query('SET LOCAL plan_cache_mode = force_generic_plan')
      // In flight again (an earlier test recorded them), within this transaction only.
      await c.query(
        `UPDATE actions_event e SET state = 'processing', resolved_at = NULL, lease_until = u.lease
         FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, lease) WHERE e.id = u.id`,
        [ids, leases],
      )
      const args = [
        literal(ids),
        literal(leases.map(l => l.toISOString())),
        `'{p}'`,
        `'{t}'`,
        `'{${ids.length}}'`,
        5,
        0.9,
        60_000,
        30_000,
        900_000,
        true,
        literal(ids.map(() => 'p')),
      ]
      const { rows } = await c.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE record_ok(${args.join(', ')})`,
      )
      const scans = nodes(rows[0]!['QUERY PLAN'][0]!.Plan).filter(n => n['Node Type'] === 'Tid Scan' && n.Alias === 'e')
      expect(scans).toHaveLength(1)
      const read = scans.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0)
      expect(read).toBe(ids.length)
    } finally {
      await c.query('ROLLBACK')
      c.release()
    }
  })
})

type PlanNode = { 'Node Type': string; Alias?: string; 'Actual Rows'?: number; 'Actual Loops'?: number; Plans?: PlanNode[] }
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

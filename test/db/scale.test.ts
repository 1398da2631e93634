import { beforeAll, describe, expect, it } from 'vitest'
import { CLAIM_SQL } from '../../lib/db/claim.js'
import { RECORD_OK_SQL, RECORD_SQL } from '../../lib/db/record.js'
import { RELEASE_SQL } from '../../lib/db/release.js'
import { DUE_BACKLOG_SQL, FAILED_COUNT_SQL, PAUSED_TARGETS_SQL } from '../../lib/db/backlog.js'
import { NEXT_DUE } from '../../lib/db/due.js'
import { DELETE_RESOLVED, DELETE_RESOLVED_WITH_FAILED, GIVE_UP } from '../../lib/db/retention.js'
import { PROGRESS_TOUCH } from '../../lib/db/progress.js'
import { useDatabase } from '../helpers/harness.js'

// 100 projects and a million resolved rows: the sweeper's statements must stay on partial indexes.
const db = useDatabase()

beforeAll(async () => {
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at, failed_at, visible_at)
    SELECT gen_random_uuid(), 'p' || (i % 100), gen_random_uuid(), 1, 't', 'x', '{}'::jsonb,
           (CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeed' END)::actions_event_state,
           now() - (i % 30) * interval '1 day', CASE WHEN i % 50 = 0 THEN now() - (i % 30) * interval '1 day' END, now() - interval '30 days'
    FROM generate_series(1, 1000000) AS i`)
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, visible_at)
    SELECT gen_random_uuid(), 'p' || (i % 100), gen_random_uuid(), 1, 't', 'x', '{}'::jsonb,
           (ARRAY['created', 'retrying', 'processing'])[1 + i % 3]::actions_event_state, now() - interval '1 minute'
    FROM generate_series(1, 2000) AS i`)
  await db.pool.query('ANALYZE actions_event')
}, 240_000)

async function plan(sql: string, params: unknown[] = []): Promise<string> {
  const { rows } = await db.pool.query(`EXPLAIN ${sql}`, params)
  return rows.map(r => r['QUERY PLAN']).join('\n')
}

describe('sweeper and claim statements at scale', () => {
  it('read the due backlog from the partial due index, never scanning the table', async () => {
    const p = await plan(DUE_BACKLOG_SQL)
    expect(p).toContain('actions_event_due_idx')
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it('read unresolved events of a project or target from the due index: next due, paused targets, give-up', async () => {
    for (const [sql, params] of [
      [NEXT_DUE.text, NEXT_DUE.values({ project: 'p1', held: [] })],
      [PAUSED_TARGETS_SQL, []],
      [GIVE_UP.text, GIVE_UP.values({ hours: 72, limit: 5000 })],
    ] as const) {
      const p = await plan(sql, [...params])
      expect(p).toContain('actions_event_due_idx')
      expect(p).not.toMatch(/Seq Scan on actions_event/)
    }
  })

  it('count failed events from the partial failed index', async () => {
    const p = await plan(FAILED_COUNT_SQL)
    expect(p).toContain('actions_event_failed_idx')
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it.each([false, true])('pick retention batches from the resolved index (failed included: %s)', async includeFailed => {
    const p = await plan((includeFailed ? DELETE_RESOLVED_WITH_FAILED : DELETE_RESOLVED).text, [7, 5000])
    expect(p).toContain('actions_event_resolved_idx')
    expect(p).toContain('actions_event_pkey')
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })

  it('record and release outcomes by primary key while statistics say nothing is claimed', async () => {
    // Statistics were gathered above; claim some rows now, as a drain does between two ANALYZE runs.
    const { rows } = await db.pool
      .query(`UPDATE actions_event SET state = 'processing', lease_until = date_trunc('milliseconds', now() + interval '1 minute')
      WHERE id IN (SELECT id FROM actions_event WHERE state = 'created' LIMIT 350) RETURNING id, lease_until, project`)
    const ids = rows.map(r => r.id)
    const projects = rows.map(r => r.project)
    const leases = rows.map(r => r.lease_until)
    for (const [sql, params] of [
      [
        RECORD_SQL,
        [
          ids,
          leases,
          ids.map(() => true),
          ids.map(() => null),
          ids.map(() => 10),
          ids.map(() => 5000),
          1e12,
          // The breaker's inputs: project, target, code, batch, attempts, Retry-After (none).
          projects,
          ids.map(() => 't'),
          ids.map(() => 200),
          ids.map((_, i) => i),
          ids.map(() => 0),
          ids.map(() => null),
          ids.map(() => null),
          // Its settings, and the dispatch progress the statement also writes.
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
        ],
      ],
      [RECORD_OK_SQL, [ids, leases, ['p'], ['t'], [1], 5, 0.9, 60_000, 30_000, 900_000, true, projects]],
      [RELEASE_SQL, [ids, leases, 'p1']],
    ] as const) {
      const p = await plan(sql, [...params])
      // One primary-key lookup per outcome, never a scan of the whole table.
      expect(p).toContain('actions_event_pkey')
      expect(p).not.toMatch(/Seq Scan on actions_event/)
    }
  })

  it('write dispatch progress without reading the event table', async () => {
    const p = await plan(PROGRESS_TOUCH.text, ['p1'])
    expect(p).toContain('Insert on actions_dispatch_progress')
    expect(p).not.toContain('actions_event ')
  })

  it('claim from the due index', async () => {
    const p = await plan(CLAIM_SQL, ['p1', ['t'], [50], [60_000], 400, 8, [], 64e6, 1, [8], [10]])
    expect(p).toContain('actions_event_due_idx')
    expect(p).not.toMatch(/Seq Scan on actions_event/)
  })
})

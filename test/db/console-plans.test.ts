import { beforeAll, describe, expect, it } from 'vitest'
import { COUNTED_RESOLVED_EVENTS, EVENT_PAGE, PROJECT_STATS, TARGET_BACKLOG } from '../../lib/db/admin-events.js'
import {
  FAILED_COUNT_CAP,
  FAILED_WINDOW_SECONDS,
  RECENT_MAX_EVENTS,
  RECENT_WINDOW_SECONDS,
  TARGET_OUTCOMES,
} from '../../lib/db/admin-recent.js'
import { TREND_LAST, TREND_MINUTES, TREND_READ } from '../../lib/db/trends.js'
import { useDatabase } from '../helpers/harness.js'

// The console's reads on one deep project beside 100 small ones, planned as they run (each statement
// is sent unnamed, so it is planned with its values): every one reads an index of columns the claim
// never writes and stops near its page, whatever the project holds. A listing that sorted the
// project's resolved rows, or counts that read them all, would read 200,000 rows here.
const db = useDatabase()
const LIMIT = 101

beforeAll(async () => {
  // big: 200,000 delivered over 20 days on 4 targets, 2,000 failed, 200 stopped, 5,000 due.
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at, failed_at, last_state_change)
    SELECT gen_random_uuid(), 'big', gen_random_uuid(), 1, 't' || (i % 4), 'x', '{}'::jsonb,
           (CASE WHEN i % 100 = 0 THEN 'failed' WHEN i % 1000 = 1 THEN 'stopped' ELSE 'succeed' END)::actions_event_state,
           now() - i * interval '8 seconds', CASE WHEN i % 100 = 0 THEN now() - i * interval '8 seconds' END, now() - i * interval '8 seconds'
    FROM generate_series(1, 200000) AS i`)
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, last_state_change)
    SELECT gen_random_uuid(), 'big', gen_random_uuid(), 1, 't' || (i % 4), 'x', '{}'::jsonb, now() - i * interval '1 second'
    FROM generate_series(1, 5000) AS i`)
  // 100 small projects of 1,000 delivered events each.
  await db.pool.query(`
    INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at, last_state_change)
    SELECT gen_random_uuid(), 'p' || (i % 100), gen_random_uuid(), 1, 't', 'x', '{}'::jsonb, 'succeed', now() - i * interval '1 second', now() - i * interval '1 second'
    FROM generate_series(1, 100000) AS i`)
  // A day of minutes for 100 targets of big.
  await db.pool.query(`
    INSERT INTO actions_target_minute (project, target, minute, requests, delivered, failed_attempts, events_failed, duration_counts)
    SELECT 'big', 'n' || t, date_trunc('minute', now()) - m * interval '1 minute', 1, 1, 0, 0, '{0,1,0,0,0,0,0,0,0,0,0,0,0,0}'
    FROM generate_series(1, 100) AS t, generate_series(0, ${TREND_MINUTES - 1}) AS m`)
  await db.pool.query('ANALYZE actions_event')
  await db.pool.query('ANALYZE actions_target_minute')
}, 180_000)

type PlanNode = {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Actual Rows'?: number
  'Actual Loops'?: number
  Plans?: PlanNode[]
}
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

/** The statement's plan as it ran (EXPLAIN ANALYZE): its scans of actions_event and what each read. */
async function ran(sql: string, values: unknown[]): Promise<PlanNode[]> {
  const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values)
  const plan = rows[0]?.['QUERY PLAN'][0]?.Plan
  if (!plan) throw new Error('no plan')
  return nodes(plan)
}

const scansOf = (plan: PlanNode[], table = 'actions_event') => plan.filter(n => n['Relation Name'] === table)
const rowsRead = (n: PlanNode) => (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1)

const page = (over: Partial<Parameters<typeof EVENT_PAGE.values>[0]> = {}) =>
  EVENT_PAGE.values({
    project: 'big',
    state: null,
    target: null,
    since: null,
    until: null,
    after_us: null,
    after_id: null,
    limit: LIMIT,
    error_chars: 200,
    ...over,
  })

describe('the console listing on a project of 200,000 events', () => {
  it('pages any state from the resolved and failed indexes, reading about a page of each', async () => {
    const plan = await ran(EVENT_PAGE.text, page())
    const scans = scansOf(plan)
    expect(scans.map(s => s['Node Type'])).not.toContain('Seq Scan')
    const resolved = scans.find(s => s['Index Name'] === 'actions_event_resolved_page_idx')
    const failed = scans.find(s => s['Index Name'] === 'actions_event_failed_idx')
    expect(resolved && rowsRead(resolved)).toBeLessThanOrEqual(LIMIT)
    // The failed branch sorts ties of failed_at by id: it reads its rows in failed_at order and stops.
    expect(failed && rowsRead(failed)).toBeLessThanOrEqual(LIMIT + 10)
    // The unresolved branch reads the backlog (5,000 here) from the due index, never history.
    const due = scans.find(s => s['Index Name'] === 'actions_event_due_idx')
    expect(due && rowsRead(due)).toBeLessThanOrEqual(5000)
  })

  it('pages succeed alone, a deep page as cheaply as the first', async () => {
    const deep = await db.pool.query<{ us: string; id: string }>(
      `SELECT (extract(epoch FROM resolved_at) * 1000000)::int8::text AS us, id::text FROM actions_event
       WHERE project = 'big' AND state = 'succeed' ORDER BY resolved_at DESC, id DESC OFFSET 150000 LIMIT 1`,
    )
    const cursor = deep.rows[0]
    if (!cursor) throw new Error('no cursor row')
    for (const values of [page({ state: 'succeed' }), page({ state: 'succeed', after_us: cursor.us, after_id: cursor.id })]) {
      const scans = scansOf(await ran(EVENT_PAGE.text, values))
      expect(scans.map(s => s['Index Name'])).toEqual(['actions_event_resolved_page_idx'])
      // Past the failed rows among them (1 in 100): a page and a little more.
      expect(rowsRead(scans[0] as PlanNode)).toBeLessThanOrEqual(LIMIT + 5)
    }
  })

  it('pages failed events from the failed index', async () => {
    const scans = scansOf(await ran(EVENT_PAGE.text, page({ state: 'failed' })))
    expect(scans.map(s => s['Index Name'])).toEqual(['actions_event_failed_idx'])
  })

  it("pages one target's resolved events from the target index", async () => {
    const scans = scansOf(await ran(EVENT_PAGE.text, page({ target: 't1' })))
    const target = scans.find(s => s['Index Name'] === 'actions_event_target_page_idx')
    expect(target && rowsRead(target)).toBeLessThanOrEqual(LIMIT + 5)
    expect(scans.map(s => s['Node Type'])).not.toContain('Seq Scan')
  })

  it('counts by state reading the backlog and the newest resolved events only', async () => {
    const plan = await ran(
      PROJECT_STATS.text,
      PROJECT_STATS.values({
        project: 'big',
        failed_window_s: FAILED_WINDOW_SECONDS,
        failed_cap: FAILED_COUNT_CAP,
        counted_resolved: COUNTED_RESOLVED_EVENTS,
      }),
    )
    const scans = scansOf(plan)
    expect(scans.map(s => s['Node Type'])).not.toContain('Seq Scan')
    expect(scans.some(s => s['Index Name'] === 'actions_event_resolved_page_idx')).toBe(true)
    for (const s of scans) expect(rowsRead(s), s['Index Name']).toBeLessThanOrEqual(COUNTED_RESOLVED_EVENTS)
    const { rows } = await db.pool.query(
      PROJECT_STATS.text,
      PROJECT_STATS.values({ project: 'big', failed_window_s: 86_400, failed_cap: 10_000, counted_resolved: COUNTED_RESOLVED_EVENTS }),
    )
    expect(rows[0]).toMatchObject({ due: 5000, resolved_read: COUNTED_RESOLVED_EVENTS })
  })

  it("takes the targets' recent outcomes from the project's newest resolutions, not every project's hour", async () => {
    const scans = scansOf(
      await ran(
        TARGET_OUTCOMES.text,
        TARGET_OUTCOMES.values({ project: 'big', window_s: RECENT_WINDOW_SECONDS, max_events: RECENT_MAX_EVENTS }),
      ),
    )
    expect(scans.map(s => s['Index Name'])).toEqual(['actions_event_resolved_page_idx'])
    expect(rowsRead(scans[0] as PlanNode)).toBeLessThanOrEqual(RECENT_MAX_EVENTS)
  })

  it('reads the due backlog by target from the due index', async () => {
    const scans = scansOf(await ran(TARGET_BACKLOG.text, TARGET_BACKLOG.values({ project: 'big' })))
    expect(scans.map(s => s['Node Type'])).not.toContain('Seq Scan')
    for (const s of scans) expect(rowsRead(s)).toBeLessThanOrEqual(5000)
  })

  it("reads one target's day of minutes by the rollup's key, and each target's last minute without the day's rows of others", async () => {
    const one = scansOf(
      await ran(TREND_READ.text, TREND_READ.values({ project: 'big', targets: ['n7'], minutes: TREND_MINUTES })),
      'actions_target_minute',
    )
    expect(one.map(s => s['Node Type'])).not.toContain('Seq Scan')
    expect(rowsRead(one[0] as PlanNode)).toBeLessThanOrEqual(TREND_MINUTES)
    const targets = Array.from({ length: 100 }, (_, i) => `n${i + 1}`)
    const last = scansOf(await ran(TREND_LAST.text, TREND_LAST.values({ project: 'big', targets })), 'actions_target_minute')
    expect(last.map(s => s['Node Type'])).not.toContain('Seq Scan')
    // One probe per target, not a day of rows each.
    for (const s of last) expect(rowsRead(s)).toBeLessThanOrEqual(targets.length)
    // The project's own series is one more target ('') of the same key: a day of rows, not one per target.
    const total = scansOf(
      await ran(TREND_READ.text, TREND_READ.values({ project: 'big', targets: [''], minutes: TREND_MINUTES })),
      'actions_target_minute',
    )
    expect(total.map(s => s['Node Type'])).not.toContain('Seq Scan')
    for (const s of total) expect(rowsRead(s)).toBeLessThanOrEqual(TREND_MINUTES)
  })
})

// Outcomes that are all successes take a statement of their own (RECORD_OK_SQL). It must leave the
// events, the targets' health and the dispatch progress exactly as the general record statement
// (RECORD_SQL) leaves them for the same successes, for every state a target's health can be in.
import { beforeAll, describe, expect, it } from 'vitest'
import { claimBatches } from '../../lib/db/claim.js'
import { DEFAULT_RECORD_SETTINGS } from '../../lib/db/health.js'
import { recordAttempts, type AttemptRecord, type RecordedRow } from '../../lib/db/record.js'
import { countStatements } from '../helpers/statements.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()
let statements: ReturnType<typeof countStatements>
beforeAll(async () => {
  statements = countStatements(db.pool)
}, 60_000)

/** A target's health before the record: none, failing, paused for failures, by an operator, for 410 Gone. */
const HEALTH: Record<string, string | undefined> = {
  none: undefined,
  failing: `3, now() - interval '1 minute', NULL, NULL, NULL, NULL`,
  paused: `5, now() - interval '5 minutes', now() - interval '1 minute', 'failures', now() + interval '30 seconds', 30000`,
  operator: `0, NULL, now() - interval '1 hour', 'operator', NULL, NULL`,
  gone: `0, NULL, now() - interval '1 hour', 'gone', NULL, NULL`,
  // Its only record is fenced off (another dispatcher's lease since): no event changes, but it answered.
  fenced: `2, now() - interval '1 minute', NULL, NULL, NULL, NULL`,
}
const TARGETS = Object.keys(HEALTH)

/** Gives `project` two claimed events per target, then the health rows above; returns a success record per event. */
async function setUp(project: string): Promise<AttemptRecord[]> {
  await db.pool.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 1, t, 'x', '{}'::jsonb FROM unnest($2::text[]) AS t, generate_series(1, 2)`,
    [project, TARGETS],
  )
  const { batches } = await claimBatches(
    db.pool,
    project,
    TARGETS.map(name => ({ name, batchSize: 2, leaseMs: 60_000, maxBatches: 1 })),
    TARGETS.length,
    { waiting: [], budgetBytes: 64e6, atLeastOne: true },
  )
  // The health each target came to while its events were out for delivery.
  for (const [target, values] of Object.entries(HEALTH)) {
    if (!values) continue
    await db.pool.query(
      `INSERT INTO actions_target_health (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms)
      VALUES ($1, $2, ${values})`,
      [project, target],
    )
  }
  return batches.flatMap(b =>
    b.events.map(e => ({
      id: e.id,
      lease: b.target === 'fenced' ? '2000-01-01 00:00:00+00' : e.lease,
      project,
      target: b.target,
      attempts: e.num_retries,
      outcome: { ok: true as const, code: 200 },
      durationMs: 5,
      maxAttempts: 3,
      initialRepeatIntervalMs: 1_000,
    })),
  )
}

/** What a record left of a project: its events and health rows, times as whether they are set or how they compare to now. */
async function state(project: string) {
  const events = await db.pool.query(
    `SELECT target, state::text, num_retries, log, resolved_at IS NOT NULL AS resolved, first_failed_at IS NULL AS unfailed,
            visible_at > now() AS leased, last_state_change >= now() - interval '1 minute' AS changed
     FROM actions_event WHERE project = $1 ORDER BY target, state, num_retries`,
    [project],
  )
  const health = await db.pool.query(
    `SELECT target, consecutive_failures, failing_since IS NOT NULL AS failing, paused_at IS NOT NULL AS paused, paused_reason,
            probe_at IS NOT NULL AS probing, probe_interval_ms
     FROM actions_target_health WHERE project = $1 ORDER BY target`,
    [project],
  )
  const progress = await db.pool.query('SELECT count(*)::int AS n FROM actions_dispatch_progress WHERE project = $1', [project])
  return { events: events.rows, health: health.rows, progress: progress.rows[0]?.n }
}

const byTarget = (rows: RecordedRow[]) => rows.map(r => ({ ...r, id: undefined })).sort((a, b) => a.target.localeCompare(b.target))

describe('recording outcomes that are all successes', () => {
  it('leaves events, health and progress as the general statement does, through the cheaper statement', async () => {
    const lean = await setUp('lean')
    const general = await setUp('general')
    // One failure of another target sends the same successes through the general statement.
    await db.pool.query(`INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
      VALUES (gen_random_uuid(), 'general', gen_random_uuid(), 1, 'z', 'x', '{}'::jsonb)`)
    const [z] = (
      await claimBatches(db.pool, 'general', [{ name: 'z', batchSize: 1, leaseMs: 60_000, maxBatches: 1 }], 1, {
        waiting: [],
        budgetBytes: 64e6,
        atLeastOne: true,
      })
    ).batches
    const zEvent = z?.events[0]
    if (!zEvent) throw new Error('z claimed')
    const failure: AttemptRecord = {
      id: zEvent.id,
      lease: zEvent.lease,
      project: 'general',
      target: 'z',
      attempts: 0,
      outcome: { ok: false, code: 500, errorMessage: 'no' },
      durationMs: 5,
      maxAttempts: 3,
      initialRepeatIntervalMs: 1_000,
    }

    statements.reset()
    const leanRows = await recordAttempts(db.pool, lean, DEFAULT_RECORD_SETTINGS, { progress: true })
    expect(statements.named('actions_record_ok')).toBe(1)
    expect(statements.named('actions_record')).toBe(0)
    const generalRows = await recordAttempts(db.pool, [...general, failure], DEFAULT_RECORD_SETTINGS, { progress: true })
    expect(statements.named('actions_record')).toBe(1)

    expect(byTarget(leanRows)).toEqual(byTarget(generalRows.filter(r => r.target !== 'z')))
    const after = await state('lean')
    const expected = await state('general')
    expect(after.events).toEqual(expected.events.filter(e => e.target !== 'z'))
    expect(after.health).toEqual(expected.health.filter(h => h.target !== 'z'))
    expect(after.progress).toBe(1)
    expect(expected.progress).toBe(1)
    // And what that is: every delivered event succeed with its attempt counted, the fenced ones untouched;
    // failing runs reset, the pause for failures lifted (and said), the other pauses kept.
    expect(
      after.events.filter(e => e.target !== 'fenced').every(e => e.state === 'succeed' && e.num_retries === 1 && e.resolved && e.unfailed),
    ).toBe(true)
    expect(after.events.filter(e => e.target === 'fenced').map(e => e.state)).toEqual(['processing', 'processing'])
    expect(after.health.map(h => [h.target, h.consecutive_failures, h.failing, h.paused_reason])).toEqual([
      ['failing', 0, false, null],
      ['fenced', 0, false, null],
      ['gone', 0, false, 'gone'],
      ['operator', 0, false, 'operator'],
      ['paused', 0, false, null],
    ])
    expect(leanRows.filter(r => r.target_resumed).map(r => r.target)).toEqual(['paused', 'paused'])
    expect(leanRows.every(r => !r.held && r.target_paused === null)).toBe(true)
  })
})

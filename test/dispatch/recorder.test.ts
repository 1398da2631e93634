import pg from 'pg'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { claimBatches } from '../../lib/db/claim.js'
import type { AttemptRecord } from '../../lib/db/record.js'
import { createRecorder, recordAll, RECORD_LINGER_MS, RECORD_MIN_OUTCOMES } from '../../lib/dispatch/recorder.js'
import { useDatabase } from '../helpers/harness.js'

// The recorder's rhythm against a real Postgres: a few outcomes wait a little for company, enough of
// them (or a flush) are written at once, and a lone outcome is never stranded by its wait.
const db = useDatabase()
/** The recorder's own pool, whose statements are named as they are sent (the record, the progress touch). */
let counting: pg.Pool
let sent: string[] = []

beforeAll(async () => {
  counting = new pg.Pool({ connectionString: db.url, max: 2 })
  const original: unknown = Reflect.get(counting, 'query')
  if (typeof original !== 'function') throw new Error('pg.Pool without query')
  Object.defineProperty(counting, 'query', {
    value: (...args: unknown[]): unknown => {
      const config = args[0]
      sent.push(typeof config === 'object' && config !== null && 'name' in config ? String(config.name) : '?')
      return Reflect.apply(original, counting, args)
    },
  })
}, 60_000)
afterAll(async () => {
  await counting.end()
})
beforeEach(async () => {
  sent = []
  await db.pool.query('TRUNCATE actions_event, actions_dispatch_progress')
})

/** Inserts and claims `n` events; returns a successful attempt record for each. */
async function claimed(n: number): Promise<AttemptRecord[]> {
  await db.pool.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb FROM generate_series(1, $1)`,
    [n],
  )
  const { batches } = await claimBatches(db.pool, 'p', [{ name: 't', batchSize: n, leaseMs: 60_000, maxBatches: 1 }], 1, {
    waiting: [],
    budgetBytes: 64e6,
    atLeastOne: true,
  })
  return batches
    .flatMap(b => b.events)
    .map(e => ({
      id: e.id,
      lease: e.lease,
      project: 'p',
      target: 't',
      attempts: e.num_retries,
      outcome: { ok: true, code: 200 },
      durationMs: 1,
      maxAttempts: 3,
      initialRepeatIntervalMs: 1_000,
    }))
}

const succeeded = async () => Number((await db.pool.query(`SELECT count(*) FROM actions_event WHERE state = 'succeed'`)).rows[0].count)
// Record statements of either kind (all successes go through actions_record_ok).
const records = () => sent.filter(name => name === 'actions_record' || name === 'actions_record_ok').length
/** When dispatch last made progress on project 'p' (the sweeper's heartbeat reads it), if ever. */
const progressed = async () =>
  (await db.pool.query<{ at: Date }>(`SELECT progressed_at AS at FROM actions_dispatch_progress WHERE project = 'p'`)).rows[0]?.at

describe('the recorder', () => {
  it('holds a few outcomes back for company, and a flush writes them at once', async () => {
    const recorder = createRecorder(counting, () => {})
    recorder.add(await claimed(3))
    expect(records()).toBe(0)
    expect(recorder.backlog()).toBe(3)
    await recorder.flush()
    expect(records()).toBe(1)
    expect(await succeeded()).toBe(3)
    expect(recorder.backlog()).toBe(0)
  })

  it(`writes ${RECORD_MIN_OUTCOMES} outcomes without waiting, and what arrives meanwhile in one more statement`, async () => {
    const all = await claimed(RECORD_MIN_OUTCOMES + 10)
    const recorder = createRecorder(counting, () => {})
    recorder.add(all.slice(0, RECORD_MIN_OUTCOMES - 1))
    expect(records()).toBe(0)
    // The one that makes the count is sent in the same turn (the statement goes out synchronously).
    recorder.add(all.slice(RECORD_MIN_OUTCOMES - 1, RECORD_MIN_OUTCOMES))
    expect(records()).toBe(1)
    for (const r of all.slice(RECORD_MIN_OUTCOMES)) recorder.add([r])
    await recorder.flush()
    expect(records()).toBe(2)
    expect(await succeeded()).toBe(RECORD_MIN_OUTCOMES + 10)
  })

  it(`writes a lone outcome on its own once it has waited ${RECORD_LINGER_MS} ms, with no flush`, async () => {
    const recorder = createRecorder(counting, () => {})
    const started = performance.now()
    recorder.add(await claimed(1))
    const deadline = started + 5_000
    while ((await succeeded()) === 0 && performance.now() < deadline) await new Promise(resolve => setTimeout(resolve, 5))
    expect(await succeeded()).toBe(1)
    expect(records()).toBe(1)
    // Not before its wait was over (timers never fire early).
    expect(performance.now() - started).toBeGreaterThanOrEqual(RECORD_LINGER_MS - 1)
  })
})

describe('the progress a recorder writes', () => {
  it('rides in the first record statement, then waits out the interval, with no statement of its own', async () => {
    const [a, b] = await claimed(2)
    if (!a || !b) throw new Error('two claimed events expected')
    const recorder = createRecorder(counting, () => {})
    recorder.add([a])
    await recorder.flush()
    const first = await progressed()
    expect(first).toBeInstanceOf(Date)
    recorder.add([b])
    await recorder.flush()
    // Within PROGRESS_INTERVAL_MS (30 s) of the first: the second statement leaves it as it was.
    expect(await progressed()).toEqual(first)
    // Each record statement is followed by the trend rollup's own small upsert (lib/db/trends.ts), none by a progress write.
    expect(sent).toEqual(['actions_record_ok', 'actions_trend_add', 'actions_record_ok', 'actions_trend_add'])
  })

  it('is not spent by a statement that changed no rows: the next one writes it', async () => {
    const [a] = await claimed(1)
    if (!a) throw new Error('a claimed event expected')
    const recorder = createRecorder(counting, () => {})
    // A lease the event does not hold (another dispatcher's claim since): fenced off, nothing changes.
    recorder.add([{ ...a, lease: '2000-01-01 00:00:00+00' }])
    await recorder.flush()
    expect(await progressed()).toBeUndefined()
    recorder.add([a])
    await recorder.flush()
    expect(await progressed()).toBeInstanceOf(Date)
  })

  it('is written after a refused statement was recorded row by row', async () => {
    const all = await claimed(3)
    const [poisoned] = all
    if (!poisoned) throw new Error('claimed events expected')
    // A real refusal by Postgres for one row's data: the bulk statement fails whole.
    await db.pool.query(`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.log::text LIKE '%poison%' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '22000'; END IF; RETURN NEW; END $$`)
    await db.pool.query('CREATE TRIGGER refuse_poison BEFORE UPDATE ON actions_event FOR EACH ROW EXECUTE FUNCTION refuse_poison()')
    try {
      const batch = all.map(r => (r === poisoned ? { ...r, outcome: { ok: false as const, code: 500, errorMessage: 'poison' } } : r))
      const { rows } = await recordAll(counting, batch, undefined, undefined, true)
      expect(rows).toHaveLength(3)
      expect(await progressed()).toBeInstanceOf(Date)
      expect(sent.filter(name => name === 'actions_progress_touch')).toHaveLength(1)
    } finally {
      await db.pool.query('DROP TRIGGER refuse_poison ON actions_event')
      await db.pool.query('DROP FUNCTION refuse_poison()')
    }
  })
})

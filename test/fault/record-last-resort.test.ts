// Names and records that Postgres cannot take: a target name past the btree row limit used
// to make every record of its failures fail, so its events stayed `processing`, uncounted, and were
// sent again on every drain with their neighbours. Now no data can stop an attempt from being counted:
// each fallback step is forced to fail here against a real Postgres.
import { randomBytes, randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { claimBatches, LEASE_EXPIRED, type ClaimedBatch } from '../../lib/db/claim.js'
import type { AttemptRecord } from '../../lib/db/record.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { recordAll, UNRECORDABLE } from '../../lib/dispatch/recorder.js'
import { enqueue } from '../../lib/enqueue.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

const env = useHarness({ receiver: true, project: 'last' })
// Random, so Postgres cannot compress the index entry under its row limit (a repeated letter would fit).
const LONG = randomBytes(2250).toString('base64')

/** A schema as a version stored before names had a bound: inserted directly, as `schema set` would refuse it. */
async function legacySchema(targets: Record<string, Record<string, unknown>>) {
  const schema = {
    targets: Object.fromEntries(Object.entries(targets).map(([name, t]) => [name, { type: 'webhook', name, url: env.rx.url, ...t }])),
    triggers: Object.fromEntries(
      Object.keys(targets).map((name, i) => [
        `to_${i}`,
        { type: 'basic', name: `to_${i}`, entity: 'Article', create: true, delete: false, update: false, target: name },
      ]),
    ),
  }
  await env.db.pool.query('INSERT INTO actions_schema (project, version, schema) VALUES ($1, 1, $2)', [env.project, JSON.stringify(schema)])
}
const enqueueTo = async (trigger: string, count: number) =>
  (
    await enqueue(env.deps, {
      project: env.project,
      transactionId: TX,
      events: Array.from({ length: count }, (_, i) => ({ trigger, payload: createPayload(i) })),
    })
  ).eventIds
const row = async (id: string) =>
  (
    await env.db.pool.query<{ state: string; num_retries: number; log: Array<Record<string, unknown>> }>(
      'SELECT state, num_retries, log FROM actions_event WHERE id = $1 AND project = $2',
      [id, env.project],
    )
  ).rows[0]
/** Claims everything due of the two targets, with a short lease. */
const claim = async (maxAttempts = 10) =>
  await claimBatches(
    env.db.pool,
    env.project,
    [LONG, 'ok'].map(name => ({ name, batchSize: 10, leaseMs: 300, maxBatches: 10, maxAttempts })),
    10,
    { waiting: [], budgetBytes: 1e9, atLeastOne: true },
  )
const failures = (batches: ClaimedBatch[]): AttemptRecord[] =>
  batches.flatMap(b =>
    b.events.map(e => ({
      id: e.id,
      lease: e.lease,
      project: env.project,
      target: b.target,
      attempts: e.num_retries,
      batch: 1,
      outcome: { ok: false as const, code: 500, errorMessage: 'Internal Server Error' },
      durationMs: 5,
      maxAttempts: 10,
      initialRepeatIntervalMs: 1000,
    })),
  )

describe('a target name Postgres cannot index', () => {
  it('is held back by dispatch: its events wait unattempted, and its neighbour is delivered exactly once', async () => {
    await legacySchema({ [LONG]: {}, ok: {} })
    const long = await enqueueTo('to_0', 3)
    const ok = await enqueueTo('to_1', 5)
    const logs = env.captureLogs()
    for (let i = 0; i < 3; i++) await drainProject(env.deps, env.project, FOREVER)
    logs.restore()
    expect(env.rx.eventIds().sort()).toEqual([...ok].sort())
    for (const id of long) expect(await row(id)).toMatchObject({ state: 'created', num_retries: 0 })
    expect(
      logs
        .records()
        .some(
          r =>
            r.msg === 'Target held back: its events wait, unclaimed' &&
            JSON.stringify(r.problems).includes('name: 3000 bytes, expected a name of at most 255 bytes'),
        ),
    ).toBe(true)
  })
})

describe("the recorder's last resort", () => {
  it('records a refused record with a minimal entry that counts the attempt, and the rest of the statement as it is', async () => {
    await legacySchema({ [LONG]: {}, ok: {} })
    const long = await enqueueTo('to_0', 2)
    const ok = await enqueueTo('to_1', 2)
    const records = failures((await claim()).batches)
    expect(records).toHaveLength(4)
    const logs = env.captureLogs()
    // The breaker's health key cannot hold the name: the statement fails (54000), then the row alone fails the same way.
    const { rows } = await recordAll(env.db.pool, records, env.log)
    logs.restore()
    expect(rows).toHaveLength(4)
    for (const id of long)
      expect(await row(id)).toMatchObject({
        state: 'retrying',
        num_retries: 1,
        log: [{ ok: false, code: 500, errorMessage: UNRECORDABLE, durationMs: 5 }],
      })
    for (const id of ok)
      expect(await row(id)).toMatchObject({
        state: 'retrying',
        num_retries: 1,
        log: [{ ok: false, code: 500, errorMessage: 'Internal Server Error' }],
      })
    const msgs = logs.records().map(r => `${String(r.msg)} ${String(r.sqlState ?? '')}`)
    expect(msgs).toContain('Recording attempts failed; recording them one by one 54000')
    expect(msgs.filter(m => m === 'Could not record an attempt with its log entry; recorded a minimal one 54000')).toHaveLength(2)
  })

  it('writes nothing when even the minimal record is refused, and the claim counts the attempt once the lease runs out', async () => {
    await legacySchema({ [LONG]: {}, ok: {} })
    const [stuck] = await enqueueTo('to_1', 1)
    // Any change that resolves or reschedules this event is refused: every record step fails for it.
    await env.db.pool.query(`CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '22000'; END $$`)
    await env.db.pool.query(`CREATE TRIGGER refuse_record BEFORE UPDATE ON actions_event FOR EACH ROW
      WHEN (OLD.id = '${stuck}' AND NEW.state <> 'processing') EXECUTE FUNCTION refuse_record()`)
    try {
      const first = await claim()
      const logs = env.captureLogs()
      const { rows, written } = await recordAll(env.db.pool, failures(first.batches), env.log)
      logs.restore()
      expect([rows, written]).toEqual([[], []])
      expect(
        logs
          .records()
          .some(r => r.msg === 'Could not record an attempt at all; it is counted when its lease runs out' && r.eventId === stuck),
      ).toBe(true)
      expect(await row(stuck ?? '')).toMatchObject({ state: 'processing', num_retries: 0, log: [] })
      // Leased: nobody takes it meanwhile.
      expect((await claim()).batches).toEqual([])
      await until(
        'the lease to run out',
        async () => (await env.db.pool.query('SELECT lease_until <= now() AS due FROM actions_event WHERE id = $1', [stuck])).rows[0].due,
      )
      const again = await claim()
      expect(again.lost).toBe(1)
      expect(again.batches.flatMap(b => b.events).map(e => [e.id, e.num_retries])).toEqual([[stuck, 1]])
      expect(await row(stuck ?? '')).toMatchObject({
        state: 'processing',
        num_retries: 1,
        log: [{ ok: false, errorMessage: LEASE_EXPIRED }],
      })
    } finally {
      await env.db.pool.query('DROP TRIGGER refuse_record ON actions_event; DROP FUNCTION refuse_record()')
    }
  })

  it('fails an event whose lost attempt was its last, in the claim, without sending it again', async () => {
    await legacySchema({ ok: { maxAttempts: 2 } })
    const [id] = await enqueueTo('to_0', 1)
    for (let lost = 1; lost <= 2; lost++) {
      const claimed = await claim(2)
      await until(
        'the lease to run out',
        async () => (await env.db.pool.query('SELECT lease_until <= now() AS due FROM actions_event WHERE id = $1', [id])).rows[0].due,
      )
      if (lost === 1) expect(claimed.batches.flatMap(b => b.events).map(e => e.num_retries)).toEqual([0])
      else expect(claimed.batches.flatMap(b => b.events).map(e => e.num_retries)).toEqual([1])
    }
    const last = await claim(2)
    expect(last).toMatchObject({ batches: [], unknownTarget: [], lost: 1 })
    expect(last.spent.map(e => e.id)).toEqual([id])
    expect(await row(id ?? '')).toMatchObject({
      state: 'failed',
      num_retries: 2,
      log: [{ errorMessage: LEASE_EXPIRED }, { errorMessage: LEASE_EXPIRED }],
    })
  })
})

describe('enqueue order', () => {
  it.each([1, 10])('claims five updates of one entity, sent in one request, in request order (batchSize %i)', async batchSize => {
    // Unordered: with per-entity order only the first of them could be claimed at a time (test/dispatch/ordering.test.ts).
    await legacySchema({ ok: { batchSize, ordering: 'none' } })
    for (let round = 0; round < 20; round++) {
      await env.db.pool.query('DELETE FROM actions_event WHERE project = $1', [env.project])
      const entity = randomUUID()
      const ids = (
        await enqueue(env.deps, {
          project: env.project,
          transactionId: TX,
          events: [1, 2, 3, 4, 5].map(v => ({
            trigger: 'to_0',
            payload: { operation: 'update', entity: 'Article', id: entity, values: { v } },
          })),
        })
      ).eventIds
      const { batches } = await claimBatches(env.db.pool, env.project, [{ name: 'ok', batchSize, leaseMs: 60_000, maxBatches: 10 }], 10, {
        waiting: [],
        budgetBytes: 1e9,
        atLeastOne: true,
      })
      const claimed = batches.flatMap(b => b.events)
      expect(claimed.map(e => e.id)).toEqual(ids)
      expect(claimed.map(e => (JSON.parse(e.payload) as { values: { v: number } }).values.v)).toEqual([1, 2, 3, 4, 5])
    }
  })
})

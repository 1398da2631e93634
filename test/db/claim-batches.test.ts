import { beforeEach, describe, expect, it } from 'vitest'
import { claimBatches, type ClaimLimits, type TargetClaimConfig } from '../../lib/db/claim.js'
import { useDatabase } from '../helpers/harness.js'

// What one claim statement takes, row by row: the order of its batches, the byte budget at its edge,
// the per-target cap, waiting targets and targets missing from the schema. The drain's tests see the
// same rules only through deliveries; these name the statement's own contract (lib/db/claim.ts).
const db = useDatabase()

beforeEach(async () => {
  await db.pool.query('TRUNCATE actions_event, actions_target_health')
})

/** The n-th test id: a uuid whose order is n's, so ties on priority and due time are read by id. */
const id = (n: number) => `00000000-0000-0000-0000-${String(n).padStart(12, '0')}`

type Row = { n: number; target: string; priority?: number; dueAgoMs?: number; text?: string }

/** Inserts due events (`created`, visible `dueAgoMs` ago, 1 s by default), each payload `{"s": text}`. */
async function insert(rows: Row[]): Promise<void> {
  await db.pool.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, priority, visible_at, payload)
     SELECT u.id, 'p', u.id, 1, u.target, 'x', u.priority, now() - u.ago * interval '1 millisecond', jsonb_build_object('s', u.text)
     FROM unnest($1::uuid[], $2::text[], $3::int[], $4::int[], $5::text[]) AS u(id, target, priority, ago, text)`,
    [
      rows.map(r => id(r.n)),
      rows.map(r => r.target),
      rows.map(r => r.priority ?? 0),
      rows.map(r => r.dueAgoMs ?? 1_000),
      rows.map(r => r.text ?? 'x'),
    ],
  )
}

const target = (name: string, batchSize: number, maxBatches = 100): TargetClaimConfig => ({ name, batchSize, leaseMs: 60_000, maxBatches })
const unlimited: ClaimLimits = { waiting: [], budgetBytes: 64e6, atLeastOne: true }
const ids = (r: Awaited<ReturnType<typeof claimBatches>>) =>
  r.batches.map(b => `${b.target}:${b.events.map(e => Number(e.id.slice(-12))).join(',')}`)

describe('claimBatches', () => {
  it('takes batches as if one by one: the most urgent event and more of its target, then the most urgent left; ties by id', async () => {
    await insert([
      { n: 1, target: 'a', dueAgoMs: 5_000 },
      { n: 2, target: 'b', priority: 5 },
      { n: 3, target: 'a', dueAgoMs: 4_000 },
      { n: 4, target: 'b', dueAgoMs: 9_000 },
      { n: 5, target: 'a', dueAgoMs: 4_000 },
      { n: 6, target: 'b', dueAgoMs: 9_000 },
      { n: 7, target: 'a', dueAgoMs: 100 },
    ])
    const r = await claimBatches(db.pool, 'p', [target('a', 2), target('b', 2)], 10, unlimited)
    // b:2 (priority 5) comes first and takes b's next most urgent (4 and 6 are due together: 4 by id);
    // then 6, due longest of what is left (b has nothing more); then a's oldest two (3 and 5 are due
    // together: 3 by id), then the rest of a.
    expect(ids(r)).toEqual(['b:2,4', 'b:6', 'a:1,3', 'a:5,7'])
    expect(r.unknownTarget).toEqual([])
    const { rows } = await db.pool.query<{ state: string; leased: boolean }>(
      `SELECT DISTINCT state::text, lease_until > now() + interval '50 seconds' AS leased FROM actions_event`,
    )
    expect(rows).toEqual([{ state: 'processing', leased: true }])
  })

  it('stops at its batch count, and a target stops at its cap while others go on', async () => {
    await insert(
      [1, 2, 3, 4].map(n => ({ n, target: 'a', dueAgoMs: 10_000 - n })).concat([5, 6].map(n => ({ n, target: 'b', dueAgoMs: 100 - n }))),
    )
    expect(ids(await claimBatches(db.pool, 'p', [target('a', 1, 2), target('b', 1)], 10, unlimited))).toEqual(['a:1', 'a:2', 'b:5', 'b:6'])
    await db.pool.query('TRUNCATE actions_event')
    await insert([1, 2, 3, 4].map(n => ({ n, target: 'a', dueAgoMs: 10_000 - n })))
    expect(ids(await claimBatches(db.pool, 'p', [target('a', 1)], 3, unlimited))).toEqual(['a:1', 'a:2', 'a:3'])
  })

  it('locks no more rows than its targets may take: a target granted one batch leaves the rest of its backlog to other claims', async () => {
    await insert([1, 2, 3, 4, 5, 6, 7, 8].map(n => ({ n, target: 'a', dueAgoMs: 10_000 - n })))
    // The claim's transaction stays open, so its row locks (FOR NO KEY UPDATE) are still held while a
    // second connection asks which due rows it could lock. Asked for 256 batches, as a drain's look-ahead
    // does, by a target allowed one (a capped target's grant), the claim locked all eight before.
    const client = await db.pool.connect()
    try {
      await client.query('BEGIN')
      const r = await claimBatches(client, 'p', [target('a', 2, 1)], 256, unlimited)
      expect(ids(r)).toEqual(['a:1,2'])
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM (SELECT 1 FROM actions_event WHERE project = 'p' FOR NO KEY UPDATE SKIP LOCKED) free`,
      )
      expect(Number(rows[0]!.n)).toBe(6)
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  })

  it('leaves out a row changed after its snapshot, still due, and the next claim takes it', async () => {
    // The claim updates rows by the place its scan locked them (lib/db/claim.ts). A row another
    // statement changes and commits while this claim waits (here: on target u's health row, which its
    // probe step updates) is locked at its new version, which the claim's snapshot cannot see.
    await insert([
      { n: 1, target: 't' },
      { n: 2, target: 'u' },
    ])
    await db.pool.query(
      `INSERT INTO actions_target_health (project, target, paused_at, paused_reason, probe_at) VALUES ('p', 'u', now(), 'failures', now() - interval '1 second')`,
    )
    const other = await db.pool.connect()
    try {
      await other.query('BEGIN')
      await other.query(`SELECT 1 FROM actions_target_health WHERE project = 'p' AND target = 'u' FOR UPDATE`)
      const claim = claimBatches(db.pool, 'p', [target('t', 1), target('u', 1)], 10, unlimited)
      for (let i = 0; i < 200; i++) {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH cfg AS%'`,
        )
        if (rows[0]!.n > 0) break
        await new Promise(resolve => setTimeout(resolve, 10))
      }
      await other.query(`UPDATE actions_event SET log = log WHERE id = $1`, [id(1)])
      await other.query('COMMIT')
      expect(ids(await claim)).toEqual(['u:2'])
    } finally {
      other.release()
    }
    const { rows } = await db.pool.query<{ state: string; lease_until: string | null }>(
      `SELECT state::text, lease_until FROM actions_event WHERE id = $1`,
      [id(1)],
    )
    expect(rows).toEqual([{ state: 'created', lease_until: null }])
    expect(ids(await claimBatches(db.pool, 'p', [target('t', 1)], 10, unlimited))).toEqual(['t:1'])
  })

  it('leaves waiting targets alone and fails the events of targets missing from the schema in the same statement', async () => {
    await insert([
      { n: 1, target: 'a' },
      { n: 2, target: 'slow' },
      { n: 3, target: 'gone' },
    ])
    const r = await claimBatches(db.pool, 'p', [target('a', 5)], 10, { ...unlimited, waiting: ['slow'] })
    expect(ids(r)).toEqual(['a:1'])
    expect(r.unknownTarget.map(e => e.id)).toEqual([id(3)])
    const { rows } = await db.pool.query(
      'SELECT target, state::text, num_retries, log, resolved_at IS NOT NULL AS resolved FROM actions_event ORDER BY id',
    )
    expect(rows).toEqual([
      { target: 'a', state: 'processing', num_retries: 0, log: [], resolved: false },
      { target: 'slow', state: 'created', num_retries: 0, log: [], resolved: false },
      // Upstream's unknown-target failure: the attempt counts, the entry has no durationMs.
      {
        target: 'gone',
        state: 'failed',
        num_retries: 1,
        log: [{ ok: false, errorMessage: 'Event target gone not found, stopping.' }],
        resolved: true,
      },
    ])
  })

  describe('the byte budget, at its edge', () => {
    // Six single-event batches of one payload size; the budget counts serialized payload bytes.
    let size = 0
    beforeEach(async () => {
      await insert([1, 2, 3, 4, 5, 6].map(n => ({ n, target: 'a', dueAgoMs: 10_000 - n, text: 'y'.repeat(100) })))
      size = (await db.pool.query<{ b: number }>('SELECT octet_length(payload::text) AS b FROM actions_event LIMIT 1')).rows[0]!.b
    })
    const claim = (budgetBytes: number, atLeastOne = false) =>
      claimBatches(db.pool, 'p', [target('a', 1)], 10, { waiting: [], budgetBytes, atLeastOne })

    it('takes the batches whose running total is exactly the budget', async () => {
      const r = await claim(3 * size)
      expect(ids(r)).toEqual(['a:1', 'a:2', 'a:3'])
      expect(r.batches.map(b => b.bytes)).toEqual([size, size, size])
    })

    it('stops before the batch that would cross it by one byte', async () => {
      expect(ids(await claim(3 * size - 1))).toEqual(['a:1', 'a:2'])
    })

    it('takes one oversized batch only when told to (nothing held), and none otherwise', async () => {
      expect(ids(await claim(size - 1))).toEqual([])
      expect(ids(await claim(0, true))).toEqual(['a:1'])
      // Only the first batch is exempt: the next must fit what is left.
      expect(ids(await claim(size - 1, true))).toEqual(['a:2'])
    })

    it('counts a batch of several events as one step against the budget', async () => {
      await db.pool.query('TRUNCATE actions_event')
      await insert([1, 2, 3, 4, 5, 6].map(n => ({ n, target: 'a', dueAgoMs: 10_000 - n, text: 'y'.repeat(100) })))
      const r = await claimBatches(db.pool, 'p', [target('a', 4)], 10, { waiting: [], budgetBytes: 5 * size, atLeastOne: false })
      // The first batch holds four events (4 × size); the second (two more) would cross 5 × size.
      expect(ids(r)).toEqual(['a:1,2,3,4'])
      expect(r.batches[0]!.bytes).toBe(4 * size)
    })
  })
})

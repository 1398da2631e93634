import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { DUE } from '../../lib/db/due.js'
import { migrate } from '../../lib/db/migrate.js'
import { releaseClaims } from '../../lib/db/release.js'
import { getCurrentSchema, storeSchema } from '../../lib/db/schemas.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()
/** Every migration, in the order it applies: a new file must be added here on purpose. */
const MIGRATIONS = [
  '001_init.sql',
  '002_dispatch_progress.sql',
  '003_target_health.sql',
  '004_event_first_failure.sql',
  '005_project_ids_and_order.sql',
  '006_entity_order.sql',
  '007_target_hold.sql',
  '008_target_flow.sql',
  '009_probe_claimed.sql',
  '010_log_bound.sql',
  '011_misconfigured.sql',
  '012_batch_split.sql',
  '013_admin_tokens.sql',
  '014_variable_updated.sql',
  '015_event_trace.sql',
  '016_key_index_unresolved.sql',
  '017_lease_outside_indexes.sql',
  '018_schema_key_order.sql',
  '019_relay_refused.sql',
  '020_breaker_window.sql',
  '023_console_trends_and_listings.sql',
]

const MIGRATIONS_DIR = fileURLToPath(new URL('../../infra/migrations/', import.meta.url))

/** Runs `body` on a fresh database migrated with the migrations named before `first` only, then drops it. */
async function atMigrationsBefore(first: string, body: (empty: TestDatabase) => Promise<void>): Promise<void> {
  const before = await mkdtemp(join(tmpdir(), 'actions-migrations-'))
  const empty = await freshDatabase()
  try {
    const earlier = (await readdir(MIGRATIONS_DIR)).filter(f => f < first)
    for (const f of earlier) await copyFile(join(MIGRATIONS_DIR, f), join(before, f))
    await empty.pool.query(
      'DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_target_flow, actions_admin_token, actions_relay_refused, actions_target_minute, actions_migration; DROP TYPE actions_event_state',
    )
    expect(await migrate(empty.pool, `${before}/`)).toHaveLength(earlier.length)
    await body(empty)
  } finally {
    await empty.drop()
    await rm(before, { recursive: true, force: true })
  }
}

describe('migrations', () => {
  it('are recorded, and running them again applies nothing', async () => {
    // The template was migrated once already; both further runs are no-ops.
    expect(await migrate(db.pool)).toEqual([])
    expect(await migrate(db.pool)).toEqual([])
    const { rows } = await db.pool.query('SELECT name FROM actions_migration')
    expect(rows.map(r => r.name)).toEqual(MIGRATIONS)
  })

  it('create the partial index the claim query uses', async () => {
    const { rows } = await db.pool.query(`SELECT indexdef FROM pg_indexes WHERE indexname = 'actions_event_due_idx'`)
    expect(rows[0]?.indexdef).toMatch(/\(project, priority DESC, visible_at, seq\) WHERE/)
  })

  it('apply from scratch on an empty database', async () => {
    const empty = await freshDatabase()
    try {
      await empty.pool.query(
        'DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_target_flow, actions_admin_token, actions_relay_refused, actions_target_minute, actions_migration; DROP TYPE actions_event_state',
      )
      expect(await migrate(empty.pool)).toEqual(MIGRATIONS)
      expect(await migrate(empty.pool)).toEqual([])
    } finally {
      await empty.drop()
    }
  })

  it('017 moves leases out of visible_at, dates failures and keeps what is due, in flight and resolved as it was', async () => {
    await atMigrationsBefore('017', async empty => {
      // As the previous version leaves them: a claim's lease in visible_at, a failure dated by its change.
      const rows: Array<[string, string, string, string | null]> = [
        ['due', 'created', `now() - interval '1 minute'`, null],
        ['later', 'retrying', `now() + interval '1 hour'`, null],
        ['leased', 'processing', `date_trunc('milliseconds', now() + interval '5 minutes')`, null],
        ['lost', 'processing', `date_trunc('milliseconds', now() - interval '5 seconds')`, null],
        ['done', 'succeed', `now() - interval '2 hours'`, `now() - interval '1 hour'`],
        ['gave_up', 'failed', `now() - interval '2 hours'`, `now() - interval '30 minutes'`],
        ['halted', 'stopped', `now() - interval '2 hours'`, `now() - interval '20 minutes'`],
      ]
      for (const [name, state, visible, resolved] of rows)
        await empty.pool.query(
          `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, visible_at, resolved_at, last_state_change, seq)
           VALUES (gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', $1, '{}', $2::actions_event_state, ${visible}, ${resolved ?? 'NULL'},
                   coalesce(${resolved ?? 'NULL'}, now()), nextval('actions_event_seq'))`,
          [name, state],
        )
      const lease = (
        await empty.pool.query<{ lease: string }>(`SELECT visible_at::text AS lease FROM actions_event WHERE trigger = 'leased'`)
      ).rows[0]!.lease
      // A claimed event's visible_at (its lease, until now) is compared as "no later than now".
      const snapshot = async () =>
        (
          await empty.pool.query(
            `SELECT id, trigger, state, CASE WHEN state = 'processing' THEN (visible_at <= now())::text ELSE visible_at::text END AS visible,
                    resolved_at, last_state_change FROM actions_event ORDER BY seq`,
          )
        ).rows
      const stored = await snapshot()

      expect(await migrate(empty.pool)).toEqual(MIGRATIONS.slice(MIGRATIONS.indexOf('017_lease_outside_indexes.sql')))
      const after = await empty.pool.query<{ trigger: string; lease_until: string | null; failed: boolean; due: boolean }>(
        `SELECT trigger, lease_until::text, failed_at = resolved_at AS failed, ${DUE} AS due FROM actions_event ORDER BY seq`,
      )
      // Nothing else moved, and no row was lost or added; claimed events are due no later than now (their
      // lease, now in lease_until, is what they wait for).
      const moved = await snapshot()
      expect(moved.filter(r => r.state === 'processing').map(r => r.visible)).toEqual(['true', 'true'])
      expect(moved.map(r => (r.state === 'processing' ? { ...r, visible: 'moved' } : r))).toEqual(
        stored.map(r => (r.state === 'processing' ? { ...r, visible: 'moved' } : r)),
      )
      expect(after.rows.map(r => [r.trigger, r.lease_until !== null, r.failed, r.due])).toEqual([
        ['due', false, null, true],
        ['later', false, null, false],
        ['leased', true, null, false],
        ['lost', true, null, true],
        ['done', false, null, false],
        ['gave_up', false, true, false],
        ['halted', false, null, false],
      ])
      expect(after.rows.find(r => r.trigger === 'leased')?.lease_until).toBe(lease)
      // The dispatcher holding the lease hands the event back (or records it) by the lease it was given.
      const [leased] = (await empty.pool.query<{ id: string }>(`SELECT id FROM actions_event WHERE trigger = 'leased'`)).rows
      expect(await releaseClaims(empty.pool, 'p', [{ id: leased!.id, lease }])).toBe(1)
      expect((await empty.pool.query(`SELECT state, ${DUE} AS due FROM actions_event WHERE trigger = 'leased'`)).rows).toEqual([
        { state: 'created', due: true },
      ])
      const { rows: defs } = await empty.pool.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'actions_event' ORDER BY indexname`,
      )
      // No index reads the columns a claim writes (state, lease_until, last_state_change): its update can be HOT.
      for (const d of defs) expect(d.indexdef).not.toMatch(/\b(state|lease_until|last_state_change)\b/)
      expect((await empty.pool.query(`SELECT reloptions FROM pg_class WHERE relname = 'actions_event'`)).rows[0]).toEqual({
        reloptions: ['fillfactor=50'],
      })
    })
  })

  it("018 stores schemas as written: stored versions keep jsonb's order, new ones keep the file's", async () => {
    await atMigrationsBefore('018', async empty => {
      const written = {
        targets: { t: { type: 'webhook', name: 't', url: 'http://h/x', headers: { 'X-Long-Name': '1', B: '2' } } },
        triggers: {},
      }
      await empty.pool.query(`INSERT INTO actions_schema (project, version, schema) VALUES ('p', 1, $1::jsonb)`, [JSON.stringify(written)])
      const before = (await empty.pool.query<{ text: string }>(`SELECT schema::text AS text FROM actions_schema`)).rows[0]!.text
      expect(await migrate(empty.pool)).toEqual(MIGRATIONS.slice(MIGRATIONS.indexOf('018_schema_key_order.sql')))
      const after = await empty.pool.query<{ text: string; type: string }>(
        `SELECT schema::text AS text, pg_typeof(schema)::text AS type FROM actions_schema WHERE version = 1`,
      )
      // The stored version is the same document, in the order jsonb had left it (shorter keys first).
      expect(after.rows[0]).toEqual({ text: before, type: 'json' })
      expect(Object.keys(JSON.parse(before).targets.t.headers)).toEqual(['B', 'X-Long-Name'])
      // Stored again, it keeps the order it was written in.
      expect(await storeSchema(empty.pool, 'p', written)).toBe(2)
      const stored = (await getCurrentSchema(empty.pool, 'p'))?.schema.targets.t
      expect(stored?.type === 'webhook' && Object.keys(stored.headers ?? {})).toEqual(['X-Long-Name', 'B'])
    })
  })

  it('005 scopes ids to projects and numbers due events in creation order, losing and duplicating no row', async () => {
    await atMigrationsBefore('005', async empty => {
      // Two rows in every state, created in a known order (the due ones out of id order on purpose).
      await empty.pool.query(`
        INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, created_at, resolved_at)
        SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 't', 'x', jsonb_build_object('i', i), s.state,
               now() - (100 - i) * interval '1 minute',
               CASE WHEN s.state IN ('succeed', 'failed', 'stopped') THEN now() END
        FROM unnest(enum_range(NULL::actions_event_state)) WITH ORDINALITY AS s(state, k), generate_series(1, 2) AS g(n),
             LATERAL (SELECT (k * 10 + g.n)::int AS i) o`)
      const read = async () =>
        (
          await empty.pool.query<{ id: string; project: string; state: string; payload: unknown; seq: string | null }>(
            `SELECT id, project, state, payload, ${'seq'} FROM actions_event ORDER BY created_at`,
          )
        ).rows
      const stored = (await empty.pool.query('SELECT id, project, state, payload FROM actions_event ORDER BY created_at')).rows
      expect(stored).toHaveLength(12)
      expect(await migrate(empty.pool)).toEqual((await readdir(MIGRATIONS_DIR)).filter(f => f >= '005').sort())
      const after = await read()
      expect(after.map(({ seq: _, ...r }) => r)).toEqual(stored)
      // Due rows numbered in creation order; resolved history left without a number.
      const due = after.filter(r => ['created', 'retrying', 'processing'].includes(r.state))
      expect(due.map(r => Number(r.seq))).toEqual([1, 2, 3, 4, 5, 6])
      expect(after.filter(r => !due.includes(r)).every(r => r.seq === null)).toBe(true)
      // The key is (id, project) now: the same id in another project is another event; new events continue the numbering.
      const id = after[0]!.id
      await empty.pool.query(
        `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
        VALUES ($1, 'q', gen_random_uuid(), 1, 't', 'x', '{}')`,
        [id],
      )
      const { rows } = await empty.pool.query<{ project: string; seq: string }>(
        'SELECT project, seq FROM actions_event WHERE id = $1 ORDER BY project',
        [id],
      )
      expect(rows.map(r => [r.project, Number(r.seq)])).toEqual([
        ['p', 1],
        ['q', 7],
      ])
      await expect(
        empty.pool.query(
          `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
        VALUES ($1, 'q', gen_random_uuid(), 1, 't', 'x', '{}')`,
          [id],
        ),
      ).rejects.toMatchObject({ code: '23505' })
    })
  })
})

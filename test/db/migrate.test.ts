import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { migrate } from '../../lib/db/migrate.js'
import { freshDatabase } from '../helpers/db.js'
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
]

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
        'DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_target_flow, actions_admin_token, actions_migration; DROP TYPE actions_event_state',
      )
      expect(await migrate(empty.pool)).toEqual(MIGRATIONS)
      expect(await migrate(empty.pool)).toEqual([])
    } finally {
      await empty.drop()
    }
  })

  it('005 scopes ids to projects and numbers due events in creation order, losing and duplicating no row', async () => {
    const MIGRATIONS = fileURLToPath(new URL('../../infra/migrations/', import.meta.url))
    const before = await mkdtemp(join(tmpdir(), 'actions-migrations-'))
    const empty = await freshDatabase()
    try {
      for (const f of (await readdir(MIGRATIONS)).filter(f => f < '005')) await copyFile(join(MIGRATIONS, f), join(before, f))
      await empty.pool.query(
        'DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_target_flow, actions_admin_token, actions_migration; DROP TYPE actions_event_state',
      )
      expect(await migrate(empty.pool, `${before}/`)).toHaveLength(4)
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
      expect(await migrate(empty.pool)).toEqual((await readdir(MIGRATIONS)).filter(f => f >= '005').sort())
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
    } finally {
      await empty.drop()
      await rm(before, { recursive: true, force: true })
    }
  })
})

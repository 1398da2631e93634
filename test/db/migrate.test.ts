import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrate } from '../../lib/db/migrate.js'
import { freshDatabase } from '../helpers/db.js'

let db: Awaited<ReturnType<typeof freshDatabase>>
beforeAll(async () => { db = await freshDatabase() })
afterAll(async () => { await db.drop() })

describe('migrations', () => {
  it('are recorded, and running them again applies nothing', async () => {
    // The template was migrated once already; both further runs are no-ops.
    expect(await migrate(db.pool)).toEqual([])
    expect(await migrate(db.pool)).toEqual([])
    const { rows } = await db.pool.query('SELECT name FROM actions_migration')
    expect(rows.map(r => r.name)).toEqual(['001_init.sql', '002_dispatch_progress.sql', '003_target_health.sql', '004_event_first_failure.sql'])
  })

  it('create the partial index the claim query uses', async () => {
    const { rows } = await db.pool.query(`SELECT indexdef FROM pg_indexes WHERE indexname = 'actions_event_due_idx'`)
    expect(rows[0]?.indexdef).toMatch(/\(project, priority DESC, visible_at\) WHERE/)
  })

  it('apply from scratch on an empty database', async () => {
    const empty = await freshDatabase()
    try {
      await empty.pool.query('DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_migration; DROP TYPE actions_event_state')
      expect(await migrate(empty.pool)).toEqual(['001_init.sql', '002_dispatch_progress.sql', '003_target_health.sql', '004_event_first_failure.sql'])
      expect(await migrate(empty.pool)).toEqual([])
    } finally {
      await empty.drop()
    }
  })
})

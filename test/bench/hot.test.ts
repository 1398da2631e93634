import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tableUpdates, updatesBetween } from '../../bench/hot.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'

// bench/hot.ts reads a run's updates of actions_event from pg_stat_user_tables. Postgres 15+ backends
// hold their counters back for up to 10 s after a flush less than a second old; the reading must still
// count every update the writers made, HOT and not.

let db: TestDatabase
let check: pg.Pool
let writer: pg.Pool
let versionNum: number

beforeAll(async () => {
  db = await freshDatabase()
  check = new pg.Pool({ connectionString: db.url, max: 1 })
  writer = new pg.Pool({ connectionString: db.url, max: 3 })
  versionNum = Number((await check.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`)).rows[0]?.v)
  await check.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), 'p', gen_random_uuid(), 1, 'hook', 't', jsonb_build_object('i', i) FROM generate_series(1, 9) AS i`,
  )
})

afterAll(async () => {
  await check?.end()
  await writer?.end()
  await db?.drop()
})

describe('tableUpdates', () => {
  it('counts every update of the writers right after they made them, heap-only ones apart', async () => {
    const before = await tableUpdates(check, [writer], versionNum)
    // Three connections at once, each updating twice in quick succession: the second update of each
    // falls within a second of its backend's last flush, so without a forced flush it would still be pending.
    const clients = await Promise.all([1, 2, 3].map(() => writer.connect()))
    try {
      await Promise.all(
        clients.map(async (c, i) => {
          // The payload is in no index: a HOT update, as nine small rows leave their page room.
          await c.query(`UPDATE actions_event SET payload = payload || '{"x": 1}' WHERE (payload->>'i')::int % 3 = $1`, [i])
          // The priority is in the due index: never HOT.
          await c.query(
            `UPDATE actions_event SET priority = priority + 1 WHERE (payload->>'i')::int % 3 = $1 AND (payload->>'i')::int <= 6`,
            [i],
          )
        }),
      )
    } finally {
      for (const c of clients) c.release()
    }
    const delta = updatesBetween(before, await tableUpdates(check, [writer], versionNum))
    expect(delta).toEqual({ updates: 15, hot: 9, allTables: 15 })
  })

  it('needs the flush: read without it, the same kind of updates are not all counted yet', async () => {
    if (versionNum < 150_000) return
    const before = await tableUpdates(check, [writer], versionNum)
    const c = await writer.connect()
    try {
      await c.query(`UPDATE actions_event SET payload = payload || '{"y": 1}'`)
      await c.query(`UPDATE actions_event SET payload = payload || '{"z": 1}'`)
    } finally {
      c.release()
    }
    const unflushed = updatesBetween(before, await tableUpdates(check, [], versionNum))
    const flushed = updatesBetween(before, await tableUpdates(check, [writer], versionNum))
    expect(flushed.updates).toBe(18)
    expect(unflushed.updates).toBeLessThan(18)
  })
})

import { inject } from 'vitest'
import pg from 'pg'
import { createPool } from '../../lib/db/pool.js'
import { withDatabase } from '../../local/postgres.js'

let counter = 0

/** A database of the test run's own: its URL, a pool on it, and `drop()`. */
export type TestDatabase = { url: string; pool: pg.Pool; drop: () => Promise<void> }

/** A fresh database cloned from the migrated template; `drop()` removes it. */
export async function freshDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl')
  const template = inject('pgTemplate')
  const name = `${template}_${process.pid}_${++counter}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`)
  } finally {
    await admin.end()
  }
  const url = withDatabase(adminUrl, name)
  const pool = createPool(url, 10)
  return {
    url,
    pool,
    drop: async () => {
      await pool.end()
      const a = new pg.Client({ connectionString: adminUrl })
      await a.connect()
      try {
        // A pool's end() resolves once it has asked its clients to end, not once they are gone. A FORCE
        // drop then would terminate a backend still closing, and that client, no longer listened to by
        // its pool, throws 57P01 as an uncaught error into whatever test file runs next. Wait (bounded)
        // for every session of the database (this file's other pools too) to leave first.
        for (let i = 0; i < 100; i++) {
          const { rows } = await a.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [name])
          if ((rows[0]?.n ?? 0) === 0) break
          await new Promise(resolve => setTimeout(resolve, 20))
        }
        await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      } finally {
        await a.end()
      }
    },
  }
}

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
      await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      await a.end()
    },
  }
}

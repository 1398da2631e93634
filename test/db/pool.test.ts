import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { createPool } from '../../lib/db/pool.js'
import { freshDatabase } from '../helpers/db.js'

let db: Awaited<ReturnType<typeof freshDatabase>>
beforeAll(async () => { db = await freshDatabase() })
afterAll(async () => { await db.drop() })

/** The SQLSTATE of a rejected query (57014: canceled by statement_timeout). */
const sqlState = (e: unknown) => (e instanceof pg.DatabaseError ? e.code : 'not a database error')

describe('a pool with a statement timeout', () => {
  it('cancels a statement that runs longer than the bound', async () => {
    const pool = createPool(db.url, 1, 300)
    try {
      const error = await pool.query('SELECT pg_sleep(5)').then(() => undefined, (e: unknown) => e)
      expect(sqlState(error)).toBe('57014')
      // The connection is still good for the next statement.
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1)
    } finally {
      await pool.end()
    }
  })

  it('cancels a statement waiting for a lock another transaction holds', async () => {
    await db.pool.query(`INSERT INTO actions_variable (project, name, value) VALUES ('p', 'N', 'v')`)
    const holder = await db.pool.connect()
    const pool = createPool(db.url, 1, 300)
    try {
      await holder.query('BEGIN')
      await holder.query(`UPDATE actions_variable SET value = 'w' WHERE project = 'p'`)
      const error = await pool.query(`UPDATE actions_variable SET value = 'x' WHERE project = 'p'`).then(() => undefined, (e: unknown) => e)
      expect(sqlState(error)).toBe('57014')
    } finally {
      await holder.query('ROLLBACK')
      holder.release()
      await pool.end()
    }
  })

  it('is what the functions get, from DB_STATEMENT_TIMEOUT_MS', async () => {
    const deps = createDeps(loadConfig({ DATABASE_URL: db.url, SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q', DB_STATEMENT_TIMEOUT_MS: '1234' }))
    try {
      expect((await deps.db.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]?.statement_timeout).toBe('1234ms')
    } finally {
      await closeDeps(deps)
    }
  })
})

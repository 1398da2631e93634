import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { ConfigError } from '../../lib/errors.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { createPool, withTransaction } from '../../lib/db/pool.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()

/** The SQLSTATE of a rejected query (57014: canceled by statement_timeout). */
const sqlState = (e: unknown) => (e instanceof pg.DatabaseError ? e.code : 'not a database error')

describe('a pool with a statement timeout', () => {
  it('cancels a statement that runs longer than the bound', async () => {
    const pool = createPool(db.url, 1, { statementTimeoutMs: 300 })
    try {
      const error = await pool.query('SELECT pg_sleep(5)').then(
        () => undefined,
        (e: unknown) => e,
      )
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
    const pool = createPool(db.url, 1, { statementTimeoutMs: 300 })
    try {
      await holder.query('BEGIN')
      await holder.query(`UPDATE actions_variable SET value = 'w' WHERE project = 'p'`)
      const error = await pool.query(`UPDATE actions_variable SET value = 'x' WHERE project = 'p'`).then(
        () => undefined,
        (e: unknown) => e,
      )
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

describe('a pool with prepared statements off (for transaction poolers)', () => {
  const off = (timeoutMs?: number) =>
    createPool(db.url, 1, { preparedStatements: false, ...(timeoutMs === undefined ? {} : { statementTimeoutMs: timeoutMs }) })

  it('sends no statement_timeout at startup', async () => {
    const pool = off(300)
    try {
      const { rows } = await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')
      expect(rows[0]?.statement_timeout).toBe(
        (await db.pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]?.statement_timeout,
      )
      expect(rows[0]?.statement_timeout).not.toBe('300ms')
    } finally {
      await pool.end()
    }
  })

  it('sends named query configs as unnamed statements, on the pool and on a checked-out client', async () => {
    const pool = off(1_000)
    try {
      const prepared = async (q: pg.PoolClient | pg.Pool) =>
        (await q.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0]?.n
      for (let i = 0; i < 2; i++)
        expect((await pool.query<{ v: number }>({ name: 'actions_probe', text: 'SELECT $1::int AS v', values: [i] })).rows[0]?.v).toBe(i)
      expect(await prepared(pool)).toBe(0)
      const seen = await withTransaction(pool, async client => {
        const { rows } = await client.query<{ v: string }>({ name: 'actions_probe_tx', text: 'SELECT $1::text AS v', values: ['x'] })
        return { v: rows[0]?.v, prepared: await prepared(client) }
      })
      expect(seen).toEqual({ v: 'x', prepared: 0 })
      // The default keeps naming them (the fast path on a direct connection).
      const on = createPool(db.url, 1)
      try {
        await on.query({ name: 'actions_probe', text: 'SELECT 1' })
        expect(await prepared(on)).toBe(1)
      } finally {
        await on.end()
      }
    } finally {
      await pool.end()
    }
  })

  it("cancels a statement that runs longer than the bound, from the client, with the server timeout's SQLSTATE", async () => {
    const pool = off(300)
    try {
      const started = Date.now()
      const error = await pool.query('SELECT pg_sleep(5)').then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(sqlState(error)).toBe('57014')
      expect(Date.now() - started).toBeLessThan(3_000)
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1)
      // No statement is left running on the server.
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)' AND state = 'active'`,
      )
      expect(rows[0]?.n).toBe(0)
    } finally {
      await pool.end()
    }
  })

  it('cancels a statement in a transaction waiting for a lock, and the transaction rolls back', async () => {
    await db.pool.query(`INSERT INTO actions_variable (project, name, value) VALUES ('q', 'N', 'v')`)
    const holder = await db.pool.connect()
    const pool = off(300)
    try {
      await holder.query('BEGIN')
      await holder.query(`UPDATE actions_variable SET value = 'w' WHERE project = 'q'`)
      const error = await withTransaction(pool, c => c.query(`UPDATE actions_variable SET value = 'x' WHERE project = 'q'`)).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(sqlState(error)).toBe('57014')
    } finally {
      await holder.query('ROLLBACK')
      holder.release()
    }
    try {
      expect((await pool.query<{ value: string }>(`SELECT value FROM actions_variable WHERE project = 'q'`)).rows[0]?.value).toBe('v')
    } finally {
      await pool.end()
    }
  })

  it('leaves a statement that finishes in time alone, callback and promise forms alike', async () => {
    const pool = off(400)
    try {
      for (let i = 0; i < 3; i++) await pool.query('SELECT pg_sleep(0.2)')
      const client = await pool.connect()
      try {
        await client.query('SELECT pg_sleep(0.2)')
        const viaCallback = await new Promise<number | undefined>((resolve, reject) => {
          client.query<{ one: number }>('SELECT 1 AS one', (err: Error | undefined, res: pg.QueryResult<{ one: number }>) =>
            err ? reject(err) : resolve(res.rows[0]?.one),
          )
        })
        expect(viaCallback).toBe(1)
        // The timers of the statements above are cleared: a wait past their bound cancels nothing.
        await new Promise(resolve => setTimeout(resolve, 500))
        expect((await client.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1)
      } finally {
        client.release()
      }
    } finally {
      await pool.end()
    }
  })

  it('is what the functions get with DB_PREPARED_STATEMENTS=false', async () => {
    const deps = createDeps(
      loadConfig({
        DATABASE_URL: db.url,
        SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q',
        DB_STATEMENT_TIMEOUT_MS: '300',
        DB_PREPARED_STATEMENTS: 'false',
      }),
    )
    try {
      expect((await deps.db.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]?.statement_timeout).not.toBe('300ms')
      expect(
        sqlState(
          await deps.db.query('SELECT pg_sleep(5)').then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      ).toBe('57014')
    } finally {
      await closeDeps(deps)
    }
  })
})

describe('DB_PREPARED_STATEMENTS and DATABASE_CA', () => {
  it('read as a boolean (default true) and a path or rds (empty: unset)', () => {
    const base = { DATABASE_URL: db.url, SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q' }
    const defaults = loadConfig(base)
    expect(defaults.DB_PREPARED_STATEMENTS).toBe(true)
    expect(defaults.DATABASE_CA).toBeUndefined()
    // The template passes both as params; an empty DATABASE_CA is its "none".
    const off = loadConfig({ ...base, DB_PREPARED_STATEMENTS: 'false', DATABASE_CA: '' })
    expect(off.DB_PREPARED_STATEMENTS).toBe(false)
    expect(off.DATABASE_CA).toBeUndefined()
    expect(loadConfig({ ...base, DATABASE_CA: 'rds' }).DATABASE_CA).toBe('rds')
    expect(() => loadConfig({ ...base, DB_PREPARED_STATEMENTS: 'off' })).toThrow(/DB_PREPARED_STATEMENTS: expected true or false/)
  })

  it('fails the pool with a config error that names the setting when the file is missing or holds no certificate', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'actions-ca-'))
    try {
      const missing = join(dir, 'missing.pem')
      expect(() => createPool(db.url, 1, { ca: missing })).toThrow(ConfigError)
      expect(() => createPool(db.url, 1, { ca: missing })).toThrow(/DATABASE_CA: cannot read the CA file .*missing\.pem \(ENOENT\)/)
      const junk = join(dir, 'junk.pem')
      await writeFile(junk, 'not a certificate')
      expect(() => createPool(db.url, 1, { ca: junk })).toThrow(/DATABASE_CA: .*junk\.pem holds no PEM certificate/)
      const huge = join(dir, 'huge.pem')
      await writeFile(huge, Buffer.alloc(1024 * 1024 + 1, 'A'))
      expect(() => createPool(db.url, 1, { ca: huge })).toThrow(/DATABASE_CA: .*huge\.pem is over 1048576 bytes, not a CA file/)
      expect(() => createPool(db.url, 1, { ca: dir })).toThrow(/DATABASE_CA: cannot read the CA file .* \(EISDIR\)/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

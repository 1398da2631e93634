import { readdir, readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type pg from 'pg'
import { withTransaction } from './pool.js'

const MIGRATIONS_DIR = fileURLToPath(new URL('../../infra/migrations/', import.meta.url))
// Serializes concurrent migrators (two cold starts, a CLI and a test) on one key.
const LOCK_KEY = 7_312_024

/**
 * Applies the numbered SQL files not yet recorded, in order, all in one transaction under an advisory lock (two
 * migrators never interleave; a failed file leaves nothing of the run applied). Returns the names applied.
 */
export async function migrate(pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter(f => /^\d+_.*\.sql$/.test(f)).sort()
  return withTransaction(pool, async client => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY])
    await client.query(`CREATE TABLE IF NOT EXISTS actions_migration (
      name text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`)
    const done = new Set((await client.query<{ name: string }>('SELECT name FROM actions_migration')).rows.map(r => r.name))
    const applied: string[] = []
    for (const file of files) {
      if (done.has(file)) continue
      await client.query(await readFile(dir + file, 'utf8'))
      await client.query('INSERT INTO actions_migration (name) VALUES ($1)', [file])
      applied.push(file)
    }
    return applied
  })
}

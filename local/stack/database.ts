// The local stack's Postgres: DATABASE_URL when given, else an embedded cluster; migrated either way.
import { dbClientConfigSchema, loadConfigPart } from '../../lib/config.js'
import { migrate } from '../../lib/db/migrate.js'
import { createPool } from '../../lib/db/pool.js'
import { startEmbeddedPostgres } from '../postgres.js'
import type { Cleanups } from './shutdown.js'

/**
 * Starts an embedded Postgres unless `env` names one (it then sets env.DATABASE_URL to it and registers
 * its stop); the database URL, and the postmaster's process id when it started one.
 */
export async function startDatabase(
  env: NodeJS.ProcessEnv,
  dataDir: string | undefined,
  cleanups: Cleanups,
  print: (line: string) => void,
): Promise<{ url: string; pid?: number }> {
  if (env.DATABASE_URL) {
    print('postgres   DATABASE_URL')
    return { url: env.DATABASE_URL }
  }
  const pg = await startEmbeddedPostgres({ ...(dataDir === undefined ? {} : { dataDir }) })
  cleanups.push(pg.stop)
  env.DATABASE_URL = pg.url
  print(`postgres   embedded at 127.0.0.1:${pg.port}${dataDir ? ` (data in ${pg.dataDir})` : ' (temporary: pass --data-dir to keep it)'}`)
  return { url: pg.url, pid: pg.pid }
}

/** Applies the migrations not applied yet, over one connection of its own. */
export async function migrateDatabase(databaseUrl: string, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<void> {
  const db = loadConfigPart(dbClientConfigSchema, env)
  const migrator = createPool(databaseUrl, 1, { preparedStatements: db.DB_PREPARED_STATEMENTS, ca: db.DATABASE_CA })
  try {
    const applied = await migrate(migrator)
    if (applied.length) print(`migrations applied: ${applied.join(', ')}`)
  } finally {
    await migrator.end()
  }
}

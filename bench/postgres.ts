import pg from 'pg'
import { startEmbeddedPostgres, withDatabase } from '../local/postgres.js'

/** A Postgres server the bench may create and drop databases on. */
export type BenchPostgres = {
  /** A URL of the server's `postgres` database, for administration. */
  adminUrl: string
  /** `SHOW server_version`, for the report. */
  version: string
  /** Where the server came from: DATABASE_URL, the local server on 5432, or an embedded one. */
  source: 'DATABASE_URL' | 'local' | 'embedded'
  /** Drops (if left over) and creates a database; returns its URL. Dropped again by `close()`. */
  freshDatabase(name: string): Promise<string>
  close(): Promise<void>
}

const LOCAL_URL = 'postgres://postgres@127.0.0.1:5432/postgres'

/** DATABASE_URL when set, else the server answering on 127.0.0.1:5432, else an embedded Postgres. */
export async function startPostgres(): Promise<BenchPostgres> {
  let source: BenchPostgres['source']
  let adminUrl: string
  let stopEmbedded: (() => Promise<void>) | undefined
  if (process.env.DATABASE_URL) {
    source = 'DATABASE_URL'
    adminUrl = process.env.DATABASE_URL
  } else if (await answers(LOCAL_URL)) {
    source = 'local'
    adminUrl = LOCAL_URL
  } else {
    const started = await startEmbeddedPostgres()
    process.stderr.write(`No DATABASE_URL and nothing on 127.0.0.1:5432: started an embedded Postgres on 127.0.0.1:${started.port}\n`)
    source = 'embedded'
    adminUrl = started.url
    stopEmbedded = started.stop
  }
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  const version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown'
  const created: string[] = []
  return {
    adminUrl,
    version,
    source,
    freshDatabase: async name => {
      // A crashed earlier run may have left it behind; every run starts from an empty database.
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      await admin.query(`CREATE DATABASE "${name}"`)
      created.push(name)
      return withDatabase(adminUrl, name)
    },
    close: async () => {
      for (const name of created) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {})
      await admin.end()
      await stopEmbedded?.()
    },
  }
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
  // A refused connection also emits 'error' on some pg versions; the failed connect() is what we act on.
  client.on('error', () => {})
  try {
    await client.connect()
    await client.end()
    return true
  } catch {
    return false
  }
}

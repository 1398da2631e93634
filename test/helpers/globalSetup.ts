import type { TestProject } from 'vitest/node'
import pg from 'pg'
import { migrate } from '../../lib/db/migrate.js'
import { startEmbeddedPostgres, withDatabase } from '../../local/postgres.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Server URL (any database) tests may create databases on. */
    pgAdminUrl: string
    /** Name of the migrated template each test file clones. */
    pgTemplate: string
  }
}

/**
 * Says which Postgres the suite runs on, and refuses a run on another major than ACTIONS_TEST_PG_MAJOR
 * when that is set (CI sets it, so a run meant for one major never passes on another).
 */
async function checkMajor(admin: pg.Client, source: string): Promise<void> {
  const { rows } = await admin.query<{ server_version_num: string }>('SHOW server_version_num')
  const major = Math.floor(Number(rows[0]?.server_version_num) / 10_000)
  process.stderr.write(`the suite runs on Postgres ${major} (${source})\n`)
  const expected = process.env['ACTIONS_TEST_PG_MAJOR']
  if (expected && Number(expected) !== major) {
    await admin.end()
    throw new Error(`ACTIONS_TEST_PG_MAJOR is ${expected}, but the ${source} Postgres is ${major}`)
  }
}

/**
 * Once per run: a Postgres (DATABASE_URL when set, else an embedded one) and a migrated template
 * database that every test file clones, so each file starts from a fresh, fully migrated schema.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let adminUrl = process.env.DATABASE_URL
  let stopEmbedded: (() => Promise<void>) | undefined
  if (!adminUrl) {
    const started = await startEmbeddedPostgres()
    process.stderr.write(`DATABASE_URL is not set: started an embedded Postgres on 127.0.0.1:${started.port}\n`)
    adminUrl = started.url
    stopEmbedded = started.stop
  }
  const template = `actions_tpl_${process.pid}_${Date.now()}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await checkMajor(admin, adminUrl === process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded')
  await admin.query(`CREATE DATABASE ${template}`)
  const tplPool = new pg.Pool({ connectionString: withDatabase(adminUrl, template), max: 1 })
  await migrate(tplPool)
  await tplPool.end()
  project.provide('pgAdminUrl', adminUrl)
  project.provide('pgTemplate', template)
  return async () => {
    // Test files drop their own databases; drop the template and any left by a crashed file.
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`${template}%`])
    for (const { datname } of rows.sort((a, b) => b.datname.length - a.datname.length)) {
      await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => {})
    }
    await admin.end()
    await stopEmbedded?.()
  }
}

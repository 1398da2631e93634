// Each hot statement, whole and exactly as sent to Postgres, lives in test/fixtures/sql/<name>.sql, so a
// reviewer reads it in one file and sees every change to it in a diff. This test fails when a module's
// statement and its fixture differ; UPDATE_SQL_FIXTURES=1 rewrites the fixtures from the modules.
import { readFileSync, writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DUE_BACKLOG_SQL, FAILED_COUNT_SQL, PAUSED_TARGETS_SQL } from '../../lib/db/backlog.js'
import { CLAIM } from '../../lib/db/claim.js'
import { HAS_DUE, NEXT_DUE } from '../../lib/db/due.js'
import { INSERT_EVENTS, INSERT_TRACED_EVENTS } from '../../lib/db/events.js'
import { FLOW_CREATE, FLOW_IN_FLIGHT, FLOW_LOCK, FLOW_SAVE } from '../../lib/db/flow.js'
import { PROGRESS_TOUCH } from '../../lib/db/progress.js'
import { RECORD_MINIMAL } from '../../lib/db/record-minimal.js'
import { RECORD, RECORD_OK } from '../../lib/db/record.js'
import { RELEASE } from '../../lib/db/release.js'
import { DELETE_RESOLVED, DELETE_RESOLVED_WITH_FAILED, GIVE_UP } from '../../lib/db/retention.js'
import { named, type Statement } from '../../lib/db/sql.js'
import { freshDatabase } from '../helpers/db.js'

// Where each is written (file and constant), so the fixture can say it and this test can check it.
type Shown = { file: string; constant: string; text: string; names: readonly string[] }
const plain = (file: string, constant: string, text: string): Shown => ({ file, constant, text, names: [] })
const shown = <P>(file: string, constant: string, s: Statement<P>): Shown => ({ file, constant, text: s.text, names: s.names })

const STATEMENTS: Record<string, Shown> = {
  insert_events: shown('lib/db/events.ts', 'INSERT_EVENTS', INSERT_EVENTS),
  insert_traced_events: shown('lib/db/events.ts', 'INSERT_TRACED_EVENTS', INSERT_TRACED_EVENTS),
  claim: shown('lib/db/claim.ts', 'CLAIM', CLAIM),
  record: shown('lib/db/record.ts', 'RECORD', RECORD),
  record_ok: shown('lib/db/record.ts', 'RECORD_OK', RECORD_OK),
  record_minimal: shown('lib/db/record-minimal.ts', 'RECORD_MINIMAL', RECORD_MINIMAL),
  release: shown('lib/db/release.ts', 'RELEASE', RELEASE),
  flow_create: shown('lib/db/flow.ts', 'FLOW_CREATE', FLOW_CREATE),
  flow_lock: shown('lib/db/flow.ts', 'FLOW_LOCK', FLOW_LOCK),
  flow_in_flight: shown('lib/db/flow.ts', 'FLOW_IN_FLIGHT', FLOW_IN_FLIGHT),
  flow_save: shown('lib/db/flow.ts', 'FLOW_SAVE', FLOW_SAVE),
  has_due: shown('lib/db/due.ts', 'HAS_DUE', HAS_DUE),
  next_due: shown('lib/db/due.ts', 'NEXT_DUE', NEXT_DUE),
  progress_touch: shown('lib/db/progress.ts', 'PROGRESS_TOUCH', PROGRESS_TOUCH),
  due_backlog: plain('lib/db/backlog.ts', 'DUE_BACKLOG_SQL', DUE_BACKLOG_SQL),
  failed_count: plain('lib/db/backlog.ts', 'FAILED_COUNT_SQL', FAILED_COUNT_SQL),
  paused_targets: plain('lib/db/backlog.ts', 'PAUSED_TARGETS_SQL', PAUSED_TARGETS_SQL),
  delete_resolved: shown('lib/db/retention.ts', 'DELETE_RESOLVED', DELETE_RESOLVED),
  delete_resolved_with_failed: shown('lib/db/retention.ts', 'DELETE_RESOLVED_WITH_FAILED', DELETE_RESOLVED_WITH_FAILED),
  give_up: shown('lib/db/retention.ts', 'GIVE_UP', GIVE_UP),
}

const fixturePath = (name: string) => new URL(`../fixtures/sql/${name}.sql`, import.meta.url)

/** The fixture's text: where the statement is written and its parameters' names as SQL comments, then the statement as sent. */
function fixtureText(s: Shown): string {
  const legend = s.names.map((n, i) => `-- $${i + 1} ${n}\n`).join('')
  return `-- ${s.file}: ${s.constant}\n${legend}${s.text}\n`
}

describe('the hot statements as sent to Postgres', () => {
  it.each(Object.keys(STATEMENTS))('test/fixtures/sql/%s.sql holds the statement as its module sends it', name => {
    const s = STATEMENTS[name]
    if (!s) throw new Error(`no statement ${name}`)
    const want = fixtureText(s)
    if (process.env.UPDATE_SQL_FIXTURES === '1') writeFileSync(fixturePath(name), want)
    expect(readFileSync(new URL(`../../${s.file}`, import.meta.url), 'utf8')).toContain(`export const ${s.constant} =`)
    expect(
      readFileSync(fixturePath(name), 'utf8'),
      'the statement changed: review it, then UPDATE_SQL_FIXTURES=1 rewrites the fixture',
    ).toBe(want)
  })
})

describe('named parameters', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    db = await freshDatabase()
  })
  afterAll(async () => {
    await db.drop()
  })

  it.each(Object.keys(STATEMENTS))('%s prepares with exactly its listed parameters', async name => {
    const s = STATEMENTS[name]
    if (!s) throw new Error(`no statement ${name}`)
    const client = await db.pool.connect()
    try {
      await client.query(`PREPARE shown AS ${s.text}`)
      const { rows } = await client.query<{ n: number }>(
        `SELECT cardinality(parameter_types) AS n FROM pg_prepared_statements WHERE name = 'shown'`,
      )
      expect(rows[0]?.n).toBe(s.names.length)
    } finally {
      await client.query('DEALLOCATE ALL').catch(() => undefined)
      client.release()
    }
  })

  it('numbers the names in the order listed and passes the values in that order', () => {
    const s = named<{ a: number; b: string }>()(['b', 'a'], 'SELECT $a::int, $b::text, $a::int + 1')
    expect(s.text).toBe('SELECT $2::int, $1::text, $2::int + 1')
    expect(s.values({ a: 7, b: 'x' })).toEqual(['x', 7])
  })

  it('refuses a name the list lacks, a listed name never used, a name listed twice and a positional parameter', () => {
    expect(() => named<{ a: number }>()(['a'], 'SELECT $a, $b')).toThrow(/\$b is not in the statement's list/)
    expect(() => named<{ a: number; b: number }>()(['a', 'b'], 'SELECT $a')).toThrow(/never uses: b/)
    expect(() => named<{ a: number }>()(['a', 'a'], 'SELECT $a')).toThrow(/listed twice/)
    expect(() => named<{ a: number }>()(['a'], 'SELECT $a, $1')).toThrow(/positional/)
  })

  it('leaves jsonpath in string literals alone', () => {
    expect(named<{ a: number }>()(['a'], `SELECT jsonb_path_query_array('[1]', '$[last]'), $a`).text).toBe(
      `SELECT jsonb_path_query_array('[1]', '$[last]'), $1`,
    )
  })
})

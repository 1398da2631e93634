import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../lib/config.js'
import { migrate } from '../lib/db/migrate.js'
import { getCurrentSchema, storeSchema } from '../lib/db/schemas.js'
import { fetchVariables } from '../lib/db/variables.js'
import { main } from '../lib/cli/main.js'
import { parseActionsSchema, SchemaValidationError } from '../lib/schema/actions.js'
import { freshDatabase } from './helpers/db.js'
import { sampleSchema } from './fixtures/schemas.js'

let db: Awaited<ReturnType<typeof freshDatabase>>
beforeAll(async () => { db = await freshDatabase() })
afterAll(async () => { await db.drop() })

describe('migrations', () => {
  it('are recorded, and running them again applies nothing', async () => {
    // The template was migrated once already; both further runs are no-ops.
    expect(await migrate(db.pool)).toEqual([])
    expect(await migrate(db.pool)).toEqual([])
    const { rows } = await db.pool.query('SELECT name FROM actions_migration')
    expect(rows.map(r => r.name)).toEqual(['001_init.sql', '002_dispatch_progress.sql', '003_target_health.sql', '004_event_first_failure.sql'])
  })

  it('create the partial index the claim query uses', async () => {
    const { rows } = await db.pool.query(`SELECT indexdef FROM pg_indexes WHERE indexname = 'actions_event_due_idx'`)
    expect(rows[0]?.indexdef).toMatch(/\(project, priority DESC, visible_at\) WHERE/)
  })

  it('apply from scratch on an empty database', async () => {
    const empty = await freshDatabase()
    try {
      await empty.pool.query('DROP TABLE actions_event, actions_variable, actions_schema, actions_dispatch_progress, actions_target_health, actions_migration; DROP TYPE actions_event_state')
      expect(await migrate(empty.pool)).toEqual(['001_init.sql', '002_dispatch_progress.sql', '003_target_health.sql', '004_event_first_failure.sql'])
      expect(await migrate(empty.pool)).toEqual([])
    } finally {
      await empty.drop()
    }
  })
})

describe('actions schema validation', () => {
  it('accepts a schema with basic and watch triggers and every target option', () => {
    const s = sampleSchema({ hook: { headers: { Authorization: 'Bearer {{token}}' }, body: { a: 1 }, payloadPath: [], timeoutMs: 1000, maxAttempts: 3, initialRepeatIntervalMs: 100, batchSize: 50 } })
    expect(parseActionsSchema(s).targets.hook?.batchSize).toBe(50)
  })

  const cases: Array<[string, (s: ReturnType<typeof sampleSchema>) => unknown, string]> = [
    ['a non-integer timeout', s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, timeoutMs: 1.5 } } }), 'targets.hook.timeoutMs: expected an integer from 1 to 60000'],
    ['a negative maxAttempts', s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, maxAttempts: -1 } } }), 'targets.hook.maxAttempts: expected an integer from 1 to 1000'],
    ['an unknown target option', s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, retries: 3 } } }), 'targets.hook: unrecognized key(s): "retries"'],
    ['a trigger naming a missing target', s => ({ ...s, triggers: { ...s.triggers, article_created: { ...s.triggers.article_created, target: 'gone' } } }), 'triggers.article_created.target: unknown target'],
    ['a target whose name differs from its key', s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, name: 'x' } } }), 'targets.hook.name: expected the key of the target'],
    ['an unknown trigger type', s => ({ ...s, triggers: { x: { type: 'cron', name: 'x', target: 'hook' } } }), 'triggers.x.type'],
  ]
  for (const [what, change, message] of cases) {
    it(`rejects ${what}, naming the path`, () => {
      const err = (() => { try { parseActionsSchema(change(sampleSchema())) } catch (e) { return e } })()
      expect(err).toBeInstanceOf(SchemaValidationError)
      expect(String(err)).toContain(message)
    })
  }

  it('stores versions in order and validates before storing', async () => {
    expect(await storeSchema(db.pool, 'p', sampleSchema())).toBe(1)
    await expect(storeSchema(db.pool, 'p', { targets: {} })).rejects.toThrow(/triggers/)
    expect(await storeSchema(db.pool, 'p', sampleSchema({ hook: { batchSize: 5 } }))).toBe(2)
    expect((await getCurrentSchema(db.pool, 'p'))?.schema.targets.hook?.batchSize).toBe(5)
  })
})

describe('config', () => {
  it('lists every problem at once and never echoes a value', () => {
    const err = (() => { try { loadConfig({ DATABASE_URL: 'not a url with secret-pw', DISPATCH_CONCURRENCY: 'lots', CLOUDWATCH_METRICS: 'maybe' }) } catch (e) { return e } })()
    expect(err).toBeInstanceOf(ConfigError)
    const msg = String(err)
    expect(msg).toContain('DATABASE_URL: expected a URL')
    expect(msg).toContain('SIGNAL_QUEUE_URL: ')
    expect(msg).toContain('DISPATCH_CONCURRENCY: expected a positive integer')
    expect(msg).toContain('CLOUDWATCH_METRICS: expected true or false')
    expect(msg).not.toContain('secret-pw')
  })

  it('applies defaults', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://localhost/x', SIGNAL_QUEUE_URL: 'http://localhost:1/q' })
    expect(c).toMatchObject({ DISPATCH_CONCURRENCY: 8, CLOUDWATCH_METRICS: false })
    expect(c.PUSHGATEWAY_URL).toBeUndefined()
  })
})

describe('operator CLI', () => {
  const run = async (...argv: string[]) => {
    const out: string[] = []
    const err: string[] = []
    const code = await main(argv, { DATABASE_URL: db.url }, { out: s => out.push(s), err: s => err.push(s) })
    return { code, out: out.join('\n'), err: err.join('\n') }
  }

  it('migrates, stores and prints a schema', async () => {
    expect(await run('migrate')).toMatchObject({ code: 0, out: 'nothing to apply' })
    const file = join(await mkdtemp(join(tmpdir(), 'cli-')), 'schema.json')
    await writeFile(file, JSON.stringify(sampleSchema()))
    expect((await run('schema', 'set', 'cli', file)).out).toMatch(/stored version 1/)
    const got = await run('schema', 'get', 'cli')
    expect(JSON.parse(got.out).schema.triggers.article_created.target).toBe('hook')
  })

  it('deletes a project only when confirmed', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'cli-')), 'schema.json')
    await writeFile(file, JSON.stringify(sampleSchema()))
    await run('schema', 'set', 'gone', file)
    await run('schema', 'set', 'gone', file)
    expect((await run('schema', 'delete', 'gone')).code).toBe(2)
    expect(await getCurrentSchema(db.pool, 'gone')).toBeDefined()
    expect(await run('schema', 'delete', 'gone', '--yes')).toMatchObject({ code: 0, out: 'removed 2 version(s) of the actions schema of gone' })
    expect(await getCurrentSchema(db.pool, 'gone')).toBeUndefined()
    expect((await run('schema', 'delete', 'gone', '--yes')).code).toBe(1)
  })

  it('rejects an invalid schema file with the path of the problem and exit code 1', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'cli-')), 'bad.json')
    await writeFile(file, JSON.stringify({ targets: { t: { type: 'webhook', name: 't', url: 'x', timeoutMs: 0 } }, triggers: {} }))
    const res = await run('schema', 'set', 'cli', file)
    expect(res.code).toBe(1)
    expect(res.err).toContain('targets.t.timeoutMs: expected an integer from 1 to 60000')
  })

  it('rejects a schema file that is not JSON without quoting it', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'cli-')), 'broken.json')
    await writeFile(file, '{"targets": {"t": {"url": "https://hooks.example/SECRET-TOKEN"}} oops')
    const res = await run('schema', 'set', 'cli', file)
    expect(res.code).toBe(1)
    expect(res.err).toContain('is not valid JSON')
    expect(res.err).not.toContain('SECRET-TOKEN')
  })

  it('sets variables in each mode and lists names without values unless asked', async () => {
    expect((await run('variables', 'set', 'v', 'A=1', 'B=secret-b')).code).toBe(0)
    await run('variables', 'set', 'v', 'A=2', 'C=3', '--mode', 'append-only-missing')
    expect(Object.fromEntries(await fetchVariables(db.pool, 'v'))).toEqual({ A: '1', B: 'secret-b', C: '3' })
    await run('variables', 'set', 'v', 'A=9')
    expect((await fetchVariables(db.pool, 'v')).get('A')).toBe('9')
    const listed = await run('variables', 'list', 'v')
    expect(listed.out.split('\n')).toEqual(['A', 'B', 'C'])
    expect(listed.out).not.toContain('secret-b')
    expect((await run('variables', 'list', 'v', '--show-values')).out).toContain('B=secret-b')
    await run('variables', 'set', 'v', 'D=4', '--mode=set')
    expect(Object.fromEntries(await fetchVariables(db.pool, 'v'))).toEqual({ D: '4' })
  })

  it('answers usage errors with exit code 2 and the usage text, never quoting a variable value', async () => {
    const res = await run('variables', 'set', 'v', 'novalue-secret')
    expect(res.code).toBe(2)
    expect(res.err).toContain('Usage: actions')
    expect(res.err).not.toContain('novalue-secret')
    expect((await run('frobnicate')).code).toBe(2)
    expect((await main(['migrate'], {}, { out: () => {}, err: () => {} }))).toBe(2)
  })
})

describe('the README', () => {
  it('documents every configuration variable', async () => {
    const { readFile } = await import('node:fs/promises')
    const { configSchema } = await import('../lib/config.js')
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
    const missing = Object.keys(configSchema.shape).filter(k => !readme.includes('`' + k + '`'))
    expect(missing).toEqual([])
  })
})

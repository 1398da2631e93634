import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getCurrentSchema } from '../../lib/db/schemas.js'
import { fetchVariables } from '../../lib/db/variables.js'
import { main } from '../../lib/cli/main.js'
import { runCli } from '../helpers/cli.js'
import { useDatabase } from '../helpers/harness.js'
import { sampleSchema } from '../fixtures/schemas.js'

const db = useDatabase()

describe('operator CLI', () => {
  const run = (...argv: string[]) => runCli({ DATABASE_URL: db.url }, argv)

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
    expect(await run('schema', 'delete', 'gone', '--yes')).toMatchObject({
      code: 0,
      out: 'removed 2 version(s) of the actions schema of gone',
    })
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
    expect(await main(['migrate'], {}, { out: () => {}, err: () => {} })).toBe(2)
  })
})

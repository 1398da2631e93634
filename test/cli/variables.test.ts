// `actions variables …`: upstream's setVariables modes, and the mistakes a command line invites.
import { beforeEach, describe, expect, it } from 'vitest'
import { fetchVariables, setVariables } from '../../lib/db/variables.js'
import { runCli } from '../helpers/cli.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()
beforeEach(async () => {
  await db.pool.query('DELETE FROM actions_variable')
  await setVariables(db.pool, 'p', { KEEP: 'k', CHANGE: 'old' }, 'merge')
})

const run = (...argv: string[]) => runCli({ DATABASE_URL: db.url }, argv)
const current = async () => Object.fromEntries(await fetchVariables(db.pool, 'p'))

describe("variables set, in upstream's modes", () => {
  it('MERGE (the default) sets the given names and keeps the others', async () => {
    expect((await run('variables', 'set', 'p', 'CHANGE=new', 'ADD=a')).code).toBe(0)
    expect(await current()).toEqual({ KEEP: 'k', CHANGE: 'new', ADD: 'a' })
  })

  it('SET makes the given names all the variables', async () => {
    expect((await run('variables', 'set', 'p', 'CHANGE=new', 'ADD=a', '--mode', 'set')).code).toBe(0)
    expect(await current()).toEqual({ CHANGE: 'new', ADD: 'a' })
  })

  it('APPEND_ONLY_MISSING adds new names and changes no existing value', async () => {
    expect((await run('variables', 'set', 'p', '--mode=append-only-missing', 'CHANGE=new', 'ADD=a')).code).toBe(0)
    expect(await current()).toEqual({ KEEP: 'k', CHANGE: 'old', ADD: 'a' })
  })

  it("keeps the last value of a name given twice, as upstream's input map does", async () => {
    await run('variables', 'set', 'p', 'ADD=1', 'ADD=2')
    expect((await current()).ADD).toBe('2')
  })

  it('refuses --mode set without pairs (exit 2) instead of deleting every variable', async () => {
    const res = await run('variables', 'set', 'p', '--mode', 'set')
    expect(res.code).toBe(2)
    expect(res.err).toContain('--mode set would delete every variable')
    expect(await current()).toEqual({ KEEP: 'k', CHANGE: 'old' })
  })

  it('answers unknown flags, unknown modes and unusable names with exit code 2, never quoting a value', async () => {
    for (const argv of [
      ['variables', 'set', 'p', 'A=1', '--mod', 'set'],
      ['variables', 'set', 'p', 'A=1', '--mode', 'replace'],
      ['variables', 'set', 'p', 'A.B=secret-value'],
      ['variables', 'set', 'p', 'A=1', '--token=secret-value'],
      ['variables', 'list', 'p', 'A=1'],
      ['variables', 'get', 'p'],
    ]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(2)
      expect(res.err).not.toContain('secret-value')
    }
    expect(await current()).toEqual({ KEEP: 'k', CHANGE: 'old' })
  })
})

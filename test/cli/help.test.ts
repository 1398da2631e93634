// `actions <command> --help` needs no setting: usage is answered before
// DATABASE_URL is read, so it works in an empty environment and touches no database.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { runCli } from '../helpers/cli.js'

const COMMANDS = ['migrate', 'schema', 'variables', 'events', 'targets', 'tokens', 'signing']
const run = (...argv: string[]) => runCli({}, argv)

describe('CLI usage without any setting', () => {
  it.each(COMMANDS)('prints the usage of %s with --help, -h and help <command> in an empty environment, exit 0', async cmd => {
    for (const argv of [
      [cmd, '--help'],
      [cmd, '-h'],
      ['help', cmd],
    ]) {
      const res = await run(...argv)
      expect(res, argv.join(' ')).toMatchObject({ code: 0, err: '' })
      expect(res.out).toMatch(new RegExp(`^Usage: actions ${cmd} `))
      expect(res.out).toMatch(new RegExp(`^  ${cmd} `, 'm'))
      // Only that command's lines: no other command's usage.
      for (const other of COMMANDS.filter(c => c !== cmd)) expect(res.out).not.toMatch(new RegExp(`^  ${other} `, 'm'))
    }
  })

  it('answers --help after a subcommand and its flags too, even with arguments that would be usage errors', async () => {
    const res = await run('events', 'retry', '--project', 'p', '--bogus', '--help')
    expect(res).toMatchObject({ code: 0, err: '' })
    expect(res.out).toContain('events retry|stop --project P')
    expect(await run('tokens', 'create', '--help')).toMatchObject({ code: 0 })
    expect((await run('tokens', 'create', '--help')).out).toContain('--role admin|deployer|viewer')
  })

  it('prints the whole usage with --help, -h and help, exit 0; with no command at all exit 2', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(0)
      for (const cmd of COMMANDS) expect(res.out).toMatch(new RegExp(`^  ${cmd} `, 'm'))
      expect(res.out).toContain('--json')
    }
    expect(await run()).toMatchObject({ code: 2 })
    expect((await run()).out).toContain('Usage: actions <command>')
  })

  it('calls an unknown command a usage error (exit 2) on stderr, with the whole usage', async () => {
    const res = await run('help', 'frobnicate')
    expect(res).toMatchObject({ code: 2, out: '' })
    expect(res.err).toContain('unknown command "frobnicate"')
    expect(res.err).toContain('Usage: actions <command>')
    expect((await run('frobnicate', '--help')).code).toBe(2)
  })

  it('takes a --help after -- as an argument, not a help request, so it still needs DATABASE_URL', async () => {
    const res = await run('events', 'show', '--', '--help')
    expect(res).toMatchObject({ code: 2, out: '' })
    expect(res.err).toBe('DATABASE_URL: required')
  })

  it('works as a process with an empty environment: the bin entry, no DATABASE_URL', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'lib/cli/main.ts', 'tokens', '--help'], {
      env: {},
      timeout: 30_000,
    })
    expect(stderr).toBe('')
    expect(stdout).toMatch(/^Usage: actions tokens /)
    expect(stdout).toContain('tokens revoke <id>')
  })
})

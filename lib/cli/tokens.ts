import type pg from 'pg'
import { z } from 'zod'
import { createToken, isRole, listTokens, revokeToken, type TokenInfo } from '../db/tokens.js'
import { nameProblem } from '../schema/limits.js'
import { oneLine } from './events.js'
import { printDocument, printLines } from './json.js'
import { parseCommand, UsageError, type Io } from './usage.js'

export const TOKENS_USAGE = `  tokens create <project> --role admin|deployer|viewer [--name N]
                                            make an admin API token of the project and print it, once
                                            (only its hash is stored); admin: everything, deployer:
                                            view and set variables, viewer: view
  tokens list [<project>]                   list tokens (id, project, role, name, created, revoked),
                                            never the token itself
  tokens revoke <id>                        revoke a token: it is refused from the next request on`

/** Characters of a project or token name printed: one line, whatever was stored. */
const NAME_CHARS = 100

/** `actions tokens create|list|revoke`: the admin API's per-project tokens (lib/db/tokens.ts). */
export async function tokensCommand(pool: pg.Pool, args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommand('tokens', args, { role: { type: 'string' }, name: { type: 'string' } })
  const [sub, arg, extra] = positionals
  if (extra !== undefined) throw new UsageError(`tokens ${sub ?? ''}: unexpected argument 3`)
  if (sub !== 'create' && (values.role !== undefined || values.name !== undefined))
    throw new UsageError(`tokens ${sub ?? ''}: --role and --name apply to create only`)
  switch (sub) {
    case 'create':
      return create(pool, arg, values.role, values.name, io)
    case 'list':
      if (arg !== undefined) usableName('tokens list', 'project', arg)
      return list(pool, arg, io)
    case 'revoke':
      return revoke(pool, arg, io)
    default:
      throw new UsageError(`tokens: unknown subcommand "${oneLine(sub ?? '', 40)}"`)
  }
}

async function create(pool: pg.Pool, project: string | undefined, role: string | undefined, name: string | undefined, io: Io) {
  if (project === undefined) throw new UsageError('tokens create: missing <project>')
  usableName('tokens create', 'project', project)
  if (role === undefined || !isRole(role)) throw new UsageError('tokens create: --role: expected admin, deployer or viewer')
  if (name !== undefined) usableName('tokens create', '--name', name)
  const created = await createToken(pool, { project, role, ...(name === undefined ? {} : { name }) })
  if (io.json) printDocument(io, created)
  else {
    io.out(`token ${created.id} (${role}) of project ${oneLine(project, NAME_CHARS)} created; it is shown only this once:`)
    io.out(created.token)
  }
  return 0
}

async function list(pool: pg.Pool, project: string | undefined, io: Io): Promise<number> {
  const tokens = await listTokens(pool, project)
  if (io.json) {
    printLines(io, tokens)
    return 0
  }
  for (const t of tokens) io.out(line(t))
  const live = tokens.filter(t => t.revokedAt === null).length
  io.out(`${tokens.length} token(s), ${live} live`)
  return 0
}

async function revoke(pool: pg.Pool, id: string | undefined, io: Io): Promise<number> {
  if (id === undefined) throw new UsageError('tokens revoke: missing <id>')
  // A token pasted where its id belongs is a secret: the message never echoes the argument.
  if (!z.uuid().safeParse(id).success) throw new UsageError('tokens revoke: expected a token id (uuid, as tokens list prints it)')
  if (!(await revokeToken(pool, id))) throw new Error(`no live token ${id} (unknown, or revoked already)`)
  if (io.json) printDocument(io, { id, revoked: true })
  else io.out(`token ${id} revoked`)
  return 0
}

/** A usage error when `value` cannot be a name (empty, or over lib/schema/limits.ts' bound); never quotes it. */
function usableName(command: string, field: string, value: string): void {
  const problem = nameProblem(field, value)
  if (problem) throw new UsageError(`${command}: ${problem}`)
}

function line(t: TokenInfo): string {
  const name = t.name === null ? '-' : oneLine(t.name, NAME_CHARS)
  const state = t.revokedAt ? `revoked=${t.revokedAt.toISOString()}` : 'live'
  return `${t.id} project=${oneLine(t.project, NAME_CHARS)} role=${t.role} name=${name} created=${t.createdAt.toISOString()} ${state}`
}

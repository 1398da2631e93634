import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { z } from 'zod'
import { migrate } from '../db/migrate.js'
import { createPool } from '../db/pool.js'
import { deleteSchema, getCurrentSchema, storeSchema } from '../db/schemas.js'
import { fetchVariables, setVariables, type VariablesMode } from '../db/variables.js'
import { eventsCommand, EventsUsageError, EVENTS_USAGE } from './events.js'
import { signingCommand, SIGNING_USAGE } from './signing.js'

export const USAGE = `Usage: actions <command> [args]

Commands:
  migrate                                   apply pending migrations (reads DATABASE_URL)
  schema set <project> <file.json>          validate and store a new actions schema version
  schema get <project>                      print the current actions schema
  schema delete <project> --yes             remove the project: its pending events then fail as
                                            unknown target, its heartbeat series goes at the next sweep
  variables set <project> NAME=VALUE... [--mode merge|set|append-only-missing]
                                            set variables (default mode: merge)
  variables list <project> [--show-values]  list variable names (values only with --show-values)
${EVENTS_USAGE}
${SIGNING_USAGE}
Environment: DATABASE_URL (postgres://user@host:port/db)

Exit codes: 0 ok, 1 failure, 2 usage error`

/** A usage mistake: printed with the usage text, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

export type Io = { out: (s: string) => void; err: (s: string) => void }
const stdio: Io = { out: s => process.stdout.write(s + '\n'), err: s => process.stderr.write(s + '\n') }

/** Runs one CLI command; returns the exit code. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = stdio): Promise<number> {
  const [cmd, ...rest] = argv
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    io.out(USAGE)
    return cmd ? 0 : 2
  }
  // Makes a secret and touches no database.
  if (cmd === 'signing') return signingCommand(rest, io)
  const dbUrl = z.url().safeParse(env.DATABASE_URL)
  if (!dbUrl.success) {
    io.err('DATABASE_URL: ' + (env.DATABASE_URL ? 'expected a URL' : 'required'))
    return 2
  }
  const pool = createPool(dbUrl.data, 2)
  try {
    await run(pool, cmd, rest, io)
    return 0
  } catch (e) {
    if (e instanceof UsageError || e instanceof EventsUsageError) {
      io.err(`${e.message}\n\n${USAGE}`)
      return 2
    }
    io.err(e instanceof Error ? `${e.name}: ${e.message}` : String(e))
    return 1
  } finally {
    await pool.end()
  }
}

async function run(pool: ReturnType<typeof createPool>, cmd: string, args: string[], io: Io): Promise<void> {
  const [sub, project, ...more] = args
  switch (cmd) {
    case 'migrate': {
      const applied = await migrate(pool)
      io.out(applied.length ? `applied ${applied.join(', ')}` : 'nothing to apply')
      return
    }
    case 'schema': {
      if (!project) throw new UsageError('schema: missing <project>')
      if (sub === 'set') {
        const file = more[0]
        if (!file) throw new UsageError('schema set: missing <file.json>')
        const version = await storeSchema(pool, project, await readJson(file))
        io.out(`stored version ${version} of the actions schema of ${project}`)
        return
      }
      if (sub === 'get') {
        const current = await getCurrentSchema(pool, project)
        if (!current) throw new Error(`unknown project "${project}"`)
        io.out(JSON.stringify({ version: current.version, schema: current.schema }, null, 2))
        return
      }
      if (sub === 'delete') {
        if (!more.includes('--yes')) throw new UsageError('schema delete: pending events of the project will fail; add --yes to confirm')
        const removed = await deleteSchema(pool, project)
        if (removed === 0) throw new Error(`unknown project "${project}"`)
        io.out(`removed ${removed} version(s) of the actions schema of ${project}`)
        return
      }
      throw new UsageError(`schema: unknown subcommand "${sub ?? ''}"`)
    }
    case 'variables': {
      if (!project) throw new UsageError('variables: missing <project>')
      if (sub === 'set') return setVariablesCommand(pool, project, more, io)
      if (sub === 'list') {
        const vars = await fetchVariables(pool, project)
        const show = more.includes('--show-values')
        for (const [name, value] of [...vars].sort(([a], [b]) => a.localeCompare(b))) io.out(show ? `${name}=${value}` : name)
        return
      }
      throw new UsageError(`variables: unknown subcommand "${sub ?? ''}"`)
    }
    case 'events':
      return eventsCommand(pool, args, io)
    default:
      throw new UsageError(`unknown command "${cmd}"`)
  }
}

async function setVariablesCommand(pool: ReturnType<typeof createPool>, project: string, args: string[], io: Io): Promise<void> {
  let mode: VariablesMode = 'merge'
  const vars: Record<string, string> = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? ''
    if (arg === '--mode' || arg.startsWith('--mode=')) {
      const value = arg === '--mode' ? args[++i] : arg.slice('--mode='.length)
      const parsed = z.enum(['merge', 'set', 'append-only-missing']).safeParse(value)
      if (!parsed.success) throw new UsageError('--mode: expected merge, set or append-only-missing')
      mode = parsed.data
      continue
    }
    const eq = arg.indexOf('=')
    // The argument may hold a secret: name only its position, never its text.
    if (eq <= 0) throw new UsageError(`variables set: argument ${i + 1} is not NAME=VALUE`)
    vars[arg.slice(0, eq)] = arg.slice(eq + 1)
  }
  if (Object.keys(vars).length === 0 && mode !== 'set') throw new UsageError('variables set: no NAME=VALUE given')
  await setVariables(pool, project, vars, mode)
  io.out(`set ${Object.keys(vars).length} variable(s) of ${project} (mode ${mode})`)
}

async function readJson(file: string): Promise<unknown> {
  const text = await readFile(file, 'utf8')
  try {
    return JSON.parse(text)
  } catch {
    // The parser's message quotes the text around the error, and a schema file holds target URLs.
    throw new Error(`${file} is not valid JSON`)
  }
}


if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2))
}

import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import type { SQSClient } from '@aws-sdk/client-sqs'
import { z } from 'zod'
import { configSchema, dbClientConfigSchema, loadConfigPart, sqsConfigSchema } from '../config.js'
import { migrate } from '../db/migrate.js'
import { createPool } from '../db/pool.js'
import { createSqsClient, sqsEndpointFromEnv } from '../deps.js'
import { deleteSchema, getCurrentSchema, storeSchema } from '../db/schemas.js'
import { fetchVariables, setVariables, type VariablesMode } from '../db/variables.js'
import { formatError } from '../errors.js'
import { createSignals, type Signals } from '../signals.js'
import { eventsCommand, EVENTS_USAGE } from './events.js'
import { signingCommand, SIGNING_USAGE } from './signing.js'
import { targetsCommand, TARGETS_USAGE } from './targets.js'
import { parseCommand, UsageError, type Io } from './usage.js'

const USAGE = `Usage: actions <command> [args]

Commands:
  migrate                                   apply pending migrations (reads DATABASE_URL)
  schema set <project> <file.json>          validate and store a new actions schema version
  schema get <project>                      print the current actions schema
  schema delete <project> --yes             remove the project: its pending events then fail as
                                            unknown target, its heartbeat series goes at the next sweep
  variables set <project> NAME=VALUE... [--mode merge|set|append-only-missing]
                                            merge (default): set the given names, keep the others;
                                            set: the given names become all the variables;
                                            append-only-missing: add names not yet set, change none
  variables list <project> [--show-values]  list variable names (values only with --show-values)
${EVENTS_USAGE}
${TARGETS_USAGE}
${SIGNING_USAGE}
Environment: DATABASE_URL (postgres://user@host:port/db), with DATABASE_CA and DB_PREPARED_STATEMENTS as in the functions; for the wake-up signal of events retry
and targets resume also SIGNAL_QUEUE_URL, AWS_REGION and the AWS SDK's usual keys (AWS_ENDPOINT_URL_SQS for an emulator),
bounded by SQS_CONNECT_TIMEOUT_MS, SQS_REQUEST_TIMEOUT_MS and SQS_MAX_ATTEMPTS as in the functions;
schema set checks targets' timeoutMs against MAX_TARGET_TIMEOUT_MS (set it as dispatch has it)

Exit codes: 0 ok, 1 failure, 2 usage error`

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
  let pool: ReturnType<typeof createPool>
  try {
    // The same TLS and pooler settings as the functions: an operator's shell points at the same database.
    const db = loadConfigPart(dbClientConfigSchema, env)
    pool = createPool(dbUrl.data, 2, { preparedStatements: db.DB_PREPARED_STATEMENTS, ca: db.DATABASE_CA })
  } catch (e) {
    io.err(formatError(e))
    return 2
  }
  let sqs: SQSClient | undefined
  const signals = (): Signals | undefined => {
    if (!env.SIGNAL_QUEUE_URL) return undefined
    sqs ??= sqsClient(env)
    return createSignals(sqs, env.SIGNAL_QUEUE_URL)
  }
  try {
    return await run({ pool, signals, env }, cmd, rest, io)
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`${e.message}\n\n${USAGE}`)
      return 2
    }
    io.err(formatError(e))
    return 1
  } finally {
    sqs?.destroy()
    await pool.end()
  }
}

type Ctx = { pool: ReturnType<typeof createPool>; signals: () => Signals | undefined; env: NodeJS.ProcessEnv }

async function run(ctx: Ctx, cmd: string, args: string[], io: Io): Promise<number> {
  const { pool } = ctx
  switch (cmd) {
    case 'migrate': {
      if (parseCommand('migrate', args, {}).positionals.length) throw new UsageError('migrate: takes no arguments')
      const applied = await migrate(pool)
      io.out(applied.length ? `applied ${applied.join(', ')}` : 'nothing to apply')
      return 0
    }
    case 'schema': {
      const {
        values,
        positionals: [sub, project, ...more],
      } = parseCommand('schema', args, { yes: { type: 'boolean' } })
      if (!project) throw new UsageError('schema: missing <project>')
      if (sub === 'set') {
        const file = more[0]
        if (!file) throw new UsageError('schema set: missing <file.json>')
        // The bound dispatch holds targets to (DESIGN §3), read with the config's rule and default.
        const { MAX_TARGET_TIMEOUT_MS } = loadConfigPart(configSchema.pick({ MAX_TARGET_TIMEOUT_MS: true }), ctx.env)
        const version = await storeSchema(pool, project, await readJson(file), { maxTimeoutMs: MAX_TARGET_TIMEOUT_MS })
        io.out(`stored version ${version} of the actions schema of ${project}`)
        return 0
      }
      if (sub === 'get') {
        const current = await getCurrentSchema(pool, project)
        if (!current) throw new Error(`unknown project "${project}"`)
        io.out(JSON.stringify({ version: current.version, schema: current.schema }, null, 2))
        return 0
      }
      if (sub === 'delete') {
        if (!values.yes) throw new UsageError('schema delete: pending events of the project will fail; add --yes to confirm')
        const removed = await deleteSchema(pool, project)
        if (removed === 0) throw new Error(`unknown project "${project}"`)
        io.out(`removed ${removed} version(s) of the actions schema of ${project}`)
        return 0
      }
      throw new UsageError(`schema: unknown subcommand "${sub ?? ''}"`)
    }
    case 'variables':
      return variablesCommand(pool, args, io)
    case 'events':
      return eventsCommand(ctx, args, io)
    case 'targets':
      return targetsCommand(ctx, args, io)
    default:
      throw new UsageError(`unknown command "${cmd}"`)
  }
}

const modeSchema = z.enum(['merge', 'set', 'append-only-missing']) satisfies z.ZodType<VariablesMode>
/** Names the templates can substitute (docs/delivery.md); any other name could never be used. */
const VARIABLE_NAME = /^[A-Za-z0-9_]+$/

async function variablesCommand(pool: Ctx['pool'], args: string[], io: Io): Promise<number> {
  const {
    values,
    positionals: [sub, project, ...pairs],
  } = parseCommand('variables', args, {
    mode: { type: 'string' },
    'show-values': { type: 'boolean' },
  })
  if (!project) throw new UsageError('variables: missing <project>')
  if (sub === 'list') {
    if (values.mode !== undefined || pairs.length) throw new UsageError('variables list: takes only <project> and --show-values')
    const vars = await fetchVariables(pool, project)
    for (const [name, value] of [...vars].sort(([a], [b]) => a.localeCompare(b))) io.out(values['show-values'] ? `${name}=${value}` : name)
    return 0
  }
  if (sub !== 'set') throw new UsageError(`variables: unknown subcommand "${sub ?? ''}"`)
  if (values['show-values']) throw new UsageError('variables set: --show-values applies to list only')
  const parsedMode = modeSchema.safeParse(values.mode ?? 'merge')
  if (!parsedMode.success) throw new UsageError('--mode: expected merge, set or append-only-missing')
  const mode = parsedMode.data
  const vars: Record<string, string> = {}
  pairs.forEach((arg, i) => {
    const eq = arg.indexOf('=')
    // The argument may hold a secret: name only its position, never its text.
    if (eq <= 0) throw new UsageError(`variables set: argument ${i + 1} is not NAME=VALUE`)
    if (!VARIABLE_NAME.test(arg.slice(0, eq)))
      throw new UsageError(`variables set: argument ${i + 1}: a NAME has only letters, digits and _`)
    vars[arg.slice(0, eq)] = arg.slice(eq + 1)
  })
  // Upstream's SET with no variables deletes them all; from a command line that is far more likely
  // a forgotten argument than a wish, so it is refused.
  if (pairs.length === 0)
    throw new UsageError(`variables set: no NAME=VALUE given${mode === 'set' ? ' (--mode set would delete every variable)' : ''}`)
  await setVariables(pool, project, vars, mode)
  io.out(`set ${Object.keys(vars).length} variable(s) of ${project} (mode ${mode})`)
  return 0
}

/**
 * The SDK client as lib/deps.ts builds it, with the functions' bounded waits (their defaults are short
 * enough for a waiting operator), from this command's environment.
 */
function sqsClient(env: NodeJS.ProcessEnv): SQSClient {
  return createSqsClient(loadConfigPart(sqsConfigSchema, env), sqsEndpointFromEnv(env))
}

async function readJson(file: string): Promise<unknown> {
  const text = await readFile(file, 'utf8')
  try {
    return JSON.parse(text)
  } catch (cause) {
    // The parser's message quotes the text around the error, and a schema file holds target URLs.
    throw new Error(`${file} is not valid JSON`, { cause: new SyntaxError(cause instanceof Error ? cause.name : 'unparsable') })
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2))
}

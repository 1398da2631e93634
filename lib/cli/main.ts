import { pathToFileURL } from 'node:url'
import type { SQSClient } from '@aws-sdk/client-sqs'
import { z } from 'zod'
import { dbClientConfigSchema, loadConfigPart, sqsConfigSchema } from '../config.js'
import { createPool } from '../db/pool.js'
import { createSqsClient, sqsEndpointFromEnv } from '../deps.js'
import { formatError } from '../errors.js'
import { createSignals, type Signals } from '../signals.js'
import { eventsCommand } from './events.js'
import { helpFor, USAGE } from './help.js'
import { takeJson } from './json.js'
import { relayCommand } from './relay.js'
import { migrateCommand, schemaCommand } from './schema.js'
import { signingCommand } from './signing.js'
import { targetsCommand } from './targets.js'
import { tokensCommand } from './tokens.js'
import { UsageError, type Io } from './usage.js'
import { variablesCommand } from './variables.js'

const stdio: Io = { out: s => process.stdout.write(s + '\n'), err: s => process.stderr.write(s + '\n') }

/** Runs one CLI command; returns the exit code. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = stdio): Promise<number> {
  // Usage first: it needs no setting, so `actions <command> --help` works before DATABASE_URL is known.
  const help = helpFor(argv)
  if (help) {
    io[help.stream](help.text)
    return help.code
  }
  const [cmd = '', ...given] = argv
  const { json, args } = takeJson(given)
  const cio: Io = { ...io, json }
  // Makes a secret and touches no database.
  if (cmd === 'signing') return signingCommand(args, cio)
  const pool = openPool(env, io)
  if (!pool) return 2
  let sqs: SQSClient | undefined
  const signals = (): Signals | undefined => {
    if (!env.SIGNAL_QUEUE_URL) return undefined
    sqs ??= sqsClient(env)
    return createSignals(sqs, env.SIGNAL_QUEUE_URL)
  }
  try {
    return await run({ pool, signals, env }, cmd, args, cio)
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

/** The pool on DATABASE_URL with the functions' TLS and pooler settings; undefined (said on stderr) when they are invalid. */
function openPool(env: NodeJS.ProcessEnv, io: Io): ReturnType<typeof createPool> | undefined {
  const dbUrl = z.url().safeParse(env.DATABASE_URL)
  if (!dbUrl.success) {
    io.err('DATABASE_URL: ' + (env.DATABASE_URL ? 'expected a URL' : 'required'))
    return undefined
  }
  try {
    // The same TLS and pooler settings as the functions: an operator's shell points at the same database.
    const db = loadConfigPart(dbClientConfigSchema, env)
    return createPool(dbUrl.data, 2, { preparedStatements: db.DB_PREPARED_STATEMENTS, ca: db.DATABASE_CA })
  } catch (e) {
    io.err(formatError(e))
    return undefined
  }
}

type Ctx = { pool: ReturnType<typeof createPool>; signals: () => Signals | undefined; env: NodeJS.ProcessEnv }

async function run(ctx: Ctx, cmd: string, args: string[], io: Io): Promise<number> {
  switch (cmd) {
    case 'migrate':
      return migrateCommand(ctx.pool, args, io)
    case 'schema':
      return schemaCommand(ctx.pool, ctx.env, args, io)
    case 'variables':
      return variablesCommand(ctx.pool, args, io)
    case 'events':
      return eventsCommand(ctx, args, io)
    case 'targets':
      return targetsCommand(ctx, args, io)
    case 'tokens':
      return tokensCommand(ctx.pool, args, io)
    case 'relay':
      return relayCommand(ctx, args, io)
    default:
      throw new UsageError(`unknown command "${cmd}"`)
  }
}

/**
 * The SDK client as lib/deps.ts builds it, with the functions' bounded waits (their defaults are short
 * enough for a waiting operator), from this command's environment.
 */
function sqsClient(env: NodeJS.ProcessEnv): SQSClient {
  return createSqsClient(loadConfigPart(sqsConfigSchema, env), sqsEndpointFromEnv(env))
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2))
}

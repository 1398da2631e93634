import pg from 'pg'

/** The client waits this much longer than the server's statement_timeout, so the server's own error (57014) normally wins. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000

/**
 * A pool whose connection failures surface as errors on the query, never as an unhandled 'error'
 * event. With `statementTimeoutMs`, the server cancels a statement that runs (or waits for a lock)
 * longer, and the client gives up a little later on a server that does not answer at all, so no
 * query can hang an invocation. Without it (migrations, the CLI), statements may take their time.
 */
export function createPool(connectionString: string, max = 10, statementTimeoutMs?: number): pg.Pool {
  const timeouts = statementTimeoutMs === undefined ? {} : { statement_timeout: statementTimeoutMs, query_timeout: statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS }
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000, ...timeouts })
  // An idle client losing its connection (database restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  return pool
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

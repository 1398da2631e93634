import pg from 'pg'

/** A pool whose connection failures surface as errors on the query, never as an unhandled 'error' event. */
export function createPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000 })
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

/**
 * Counts every statement sent through the pool, including those on checked-out clients (BEGIN and
 * COMMIT count too). Tests and benchmarks use it to hold statements-per-event budgets.
 */
export function countStatements(pool: pg.Pool): { count(): number; reset(): void } {
  let n = 0
  const patched = new WeakSet<object>()
  const patch = (target: object) => {
    if (patched.has(target)) return
    patched.add(target)
    const original: unknown = Reflect.get(target, 'query')
    if (typeof original !== 'function') return
    Object.defineProperty(target, 'query', {
      configurable: true,
      value: (...args: unknown[]): unknown => {
        n++
        return Reflect.apply(original, target, args)
      },
    })
  }
  pool.on('acquire', client => patch(client))
  // pool.query checks out a client itself, which the acquire hook counts; patching both would count twice.
  return { count: () => n, reset: () => { n = 0 } }
}

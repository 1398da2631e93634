// Closing idle database connections before Lambda freezes an environment.
import type pg from 'pg'

/**
 * Closes the pool's idle connections (the sweeper's, at the end of a pass): Lambda gives no hook before
 * it freezes an environment, and a frozen environment would hold them open on the server for the minute
 * until the next pass. pg's pool has no "close idle" call; checking an idle client out and releasing it
 * destroyed is the public way. A client in use is never touched, and none is opened.
 */
export async function closeIdleConnections(pool: Pick<pg.Pool, 'idleCount' | 'connect'>): Promise<void> {
  for (let left = pool.idleCount; left > 0 && pool.idleCount > 0; left--) {
    const client = await pool.connect()
    client.release(true)
  }
}

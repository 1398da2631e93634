import type pg from 'pg'

/** Row updates of `actions_event` (all, and heap-only ones) and of every user table, from pg_stat_user_tables. */
export type TableUpdates = { updates: number; hot: number; allTables: number }

/** The counters `after` gained over `before`: the updates of one run. */
export const updatesBetween = (before: TableUpdates, after: TableUpdates): TableUpdates => ({
  updates: after.updates - before.updates,
  hot: after.hot - before.hot,
  allTables: after.allTables - before.allTables,
})

/**
 * Reads the update counters of the database `check` is connected to, after making the backends of
 * `writers` publish what they counted. Since Postgres 15 a backend keeps its table counters to itself
 * until it flushes them: at most once a second, and a backend that goes idle within that second holds
 * them up to 10 s more (PGSTAT_IDLE_INTERVAL), so a reading right after a run would miss its last
 * statements. `pg_stat_force_next_flush()` makes the backend that calls it flush when its transaction
 * ends, before it answers; so every connection of each pool calls it, all checked out at once so that
 * each is a different one. Backends that have exited flushed at exit. Before 15 the counters went to the
 * stats collector within half a second, so there it waits.
 */
export async function tableUpdates(check: pg.Pool, writers: readonly pg.Pool[], serverVersionNum: number): Promise<TableUpdates> {
  if (serverVersionNum >= 150_000) {
    for (const pool of writers) {
      const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()))
      try {
        await Promise.all(clients.map(c => c.query('SELECT pg_stat_force_next_flush()')))
      } finally {
        for (const c of clients) c.release()
      }
    }
  } else {
    await new Promise(resolve => setTimeout(resolve, 1_500))
  }
  // One statement is one transaction, so it sees the counters as they are now (stats_fetch_consistency
  // caches them for a transaction); the explicit clear keeps that true inside one too.
  await check.query('SELECT pg_stat_clear_snapshot()')
  const { rows } = await check.query<{ updates: string; hot: string; all_tables: string }>(
    `SELECT coalesce(sum(n_tup_upd) FILTER (WHERE relid = 'actions_event'::regclass), 0) AS updates,
            coalesce(sum(n_tup_hot_upd) FILTER (WHERE relid = 'actions_event'::regclass), 0) AS hot,
            coalesce(sum(n_tup_upd), 0) AS all_tables
     FROM pg_stat_user_tables`,
  )
  const row = rows[0]
  return { updates: Number(row?.updates ?? 0), hot: Number(row?.hot ?? 0), allTables: Number(row?.all_tables ?? 0) }
}

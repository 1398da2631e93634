import type { Queryable } from './pool.js'
import { named } from './sql.js'

/**
 * A drain writes its project's progress at most this often. Often enough that a healthy drain,
 * however long (up to the 15-minute Lambda maximum), keeps the heartbeat within one sweep interval
 * of fresh; rare enough to be one tiny upsert per drain in the common short case, never per batch.
 */
export const PROGRESS_INTERVAL_MS = 30_000

/** The project's progress, now. GREATEST keeps concurrent drains from moving it back. */
export const PROGRESS_TOUCH = named<{ project: string }>()(
  ['project'],
  `INSERT INTO actions_dispatch_progress (project, progressed_at) VALUES ($project, now())
  ON CONFLICT (project) DO UPDATE SET progressed_at = GREATEST(actions_dispatch_progress.progressed_at, excluded.progressed_at)`,
)

/** Records that dispatch just made progress on the project. */
export async function touchProgress(db: Queryable, project: string): Promise<void> {
  await db.query({ name: 'actions_progress_touch', text: PROGRESS_TOUCH.text, values: PROGRESS_TOUCH.values({ project }) })
}

/**
 * A drain's progress rhythm: the first record statement that changes rows writes the project's
 * progress (short drains count), later ones only once PROGRESS_INTERVAL_MS has passed since the last
 * write. The write rides in the record statement itself (recordAttempts' `progress`).
 */
export function progressRhythm(intervalMs = PROGRESS_INTERVAL_MS): { due(): boolean; written(): void } {
  let last = -Infinity
  return {
    due: () => performance.now() - last >= intervalMs,
    written: () => {
      last = performance.now()
    },
  }
}

/** The database's now and, per project, when dispatch last made progress (Unix seconds). */
export async function readProgress(db: Queryable): Promise<{ nowSeconds: number; progress: Map<string, number> }> {
  const { rows } = await db.query<{ project: string | null; at: number | null; now: number }>(
    `SELECT p.project, extract(epoch FROM p.progressed_at)::float8 AS at, extract(epoch FROM now())::float8 AS now
     FROM (SELECT 1) one LEFT JOIN actions_dispatch_progress p ON true`,
  )
  const progress = new Map<string, number>()
  for (const r of rows) if (r.project !== null && r.at !== null) progress.set(r.project, r.at)
  return { nowSeconds: rows[0]?.now ?? Date.now() / 1000, progress }
}

/**
 * Dispatch progress (the sweeper's heartbeat, lib/db/progress.ts) rides in both record statements when
 * `$progress` asks: a short drain's own upsert was a statement and a commit of its own. GREATEST: never
 * moved back.
 */
export const PROGRESS_UPSERT = `progress AS (
    INSERT INTO actions_dispatch_progress (project, progressed_at)
    SELECT DISTINCT ev.project, now() FROM ev WHERE $progress::bool
    ON CONFLICT (project) DO UPDATE SET progressed_at = GREATEST(actions_dispatch_progress.progressed_at, excluded.progressed_at)
  )`

import { appendedLog, droppedAfterAppend } from './log.js'
import { PROCESSING } from './fence.js'
import type { Queryable } from './pool.js'
import type { AttemptRecord, RecordedRow } from './record-types.js'
import { clampInt, MAX_BACKOFF_MS } from './record-values.js'
import { named } from './sql.js'

/**
 * The last resort of a record the database refused for its data (lib/dispatch/recorder.ts): the event
 * row alone, no health, no progress, no receiver text, so nothing a receiver or a stored schema holds
 * can make it fail. The attempt counts and the entry says why it is bare (`error_message`).
 */
export const RECORD_MINIMAL = named<{
  id: string
  lease: string
  project: string
  ok: boolean
  code: number | null
  max_attempts: number
  interval_ms: number
  backoff_cap_ms: number
  error_message: string
  duration_ms: number
}>()(
  ['id', 'lease', 'project', 'ok', 'code', 'max_attempts', 'interval_ms', 'backoff_cap_ms', 'error_message', 'duration_ms'],
  `UPDATE actions_event e SET
    num_retries = e.num_retries + 1,
    state = CASE WHEN $ok::bool THEN 'succeed' WHEN e.num_retries + 1 >= $max_attempts::int THEN 'failed' ELSE 'retrying' END::actions_event_state,
    visible_at = CASE WHEN $ok::bool OR e.num_retries + 1 >= $max_attempts::int THEN e.visible_at
                      ELSE now() + least($interval_ms::int * power(2, e.num_retries), $backoff_cap_ms::float8) * interval '1 millisecond' END,
    resolved_at = CASE WHEN $ok::bool OR e.num_retries + 1 >= $max_attempts::int THEN now() END,
    failed_at = CASE WHEN NOT $ok::bool AND e.num_retries + 1 >= $max_attempts::int THEN now() END,
    lease_until = NULL,
    log = CASE WHEN $ok::bool THEN e.log
               ELSE ${appendedLog('e', `jsonb_strip_nulls(jsonb_build_object('ok', false, 'code', $code::int, 'errorMessage', $error_message::text, 'durationMs', $duration_ms::int))`)} END,
    log_dropped = CASE WHEN $ok::bool THEN e.log_dropped ELSE ${droppedAfterAppend('e')} END,
    first_failed_at = CASE WHEN $ok::bool THEN NULL ELSE coalesce(e.first_failed_at, now()) END,
    last_state_change = now()
  WHERE e.id = $id AND e.project = $project AND ${PROCESSING} AND e.lease_until = $lease::timestamptz
  RETURNING e.id, e.state, e.num_retries, e.target, e.trigger, false AS held, NULL::text AS target_paused, false AS target_resumed,
            e.order_key IS NOT NULL AS keyed`,
)

/** Records one attempt by {@link RECORD_MINIMAL}, with `errorMessage` (ours, never receiver text) as its entry. */
export async function recordMinimal(db: Queryable, r: AttemptRecord, errorMessage: string): Promise<RecordedRow[]> {
  const { rows } = await db.query<RecordedRow>(
    RECORD_MINIMAL.text,
    RECORD_MINIMAL.values({
      id: r.id,
      lease: r.lease,
      project: r.project,
      ok: r.outcome.ok,
      code: r.outcome.code ?? null,
      max_attempts: clampInt(r.maxAttempts, 1),
      interval_ms: clampInt(r.initialRepeatIntervalMs, 0),
      backoff_cap_ms: MAX_BACKOFF_MS,
      error_message: errorMessage,
      duration_ms: clampInt(r.durationMs, 0),
    }),
  )
  return rows
}

/**
 * The attempt log's bound (migration 010): an event keeps its first log entry and its last
 * {@link LOG_KEPT_LAST}; the entries in between are dropped and counted in `log_dropped`. The first
 * says how the trouble began, the last ones what is happening now; a week of probes would otherwise
 * grow one row by hundreds of entries, each append rewriting it.
 */
export const LOG_KEPT_LAST = 20

/** The log with `entry` (a jsonb expression) appended, within the bound; `e` names the event row. */
export const appendedLog = (e: string, entry: string) => `CASE WHEN jsonb_array_length(${e}.log) <= ${LOG_KEPT_LAST}
      THEN ${e}.log || jsonb_build_array(${entry})
      ELSE jsonb_build_array(${e}.log -> 0) || jsonb_path_query_array(${e}.log, '$[last - ${LOG_KEPT_LAST - 2} to last]') || jsonb_build_array(${entry}) END`

/** `log_dropped` after appending one entry to the log of `e`. */
export const droppedAfterAppend = (e: string) =>
  `${e}.log_dropped + CASE WHEN jsonb_array_length(${e}.log) <= ${LOG_KEPT_LAST} THEN 0 ELSE 1 END`

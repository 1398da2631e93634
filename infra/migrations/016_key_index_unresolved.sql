-- The per-entity order probe (lib/db/due.ts headOfKey) asks for an earlier unresolved event of a key.
-- With the key index defined on the same states as the due index, statistics taken while few keys
-- existed let the planner answer that probe from actions_event_due_idx (project, seq <), reading the
-- project's whole backlog for every candidate: claims took seconds at 5,000 events/s. Unresolved is
-- also `resolved_at IS NULL` (every statement that resolves an event sets it, every one that reopens
-- one clears it), and the probe now says it that way: only this index's predicate matches it. The
-- index holds unresolved keyed events only (the backlog), so rebuilding it is quick.
DROP INDEX actions_event_key_idx;
CREATE INDEX actions_event_key_idx ON actions_event (order_key, seq) WHERE order_key IS NOT NULL AND resolved_at IS NULL;

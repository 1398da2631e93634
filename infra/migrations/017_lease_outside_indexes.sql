-- The claim's write becomes a heap-only (HOT) update: it no longer changes a column any
-- index covers, so Postgres writes no index entry for it and can reuse the page's space in place.
-- Before, the claim wrote its lease into `visible_at` (a column of the due index) and moved `state`
-- (in every partial index's predicate), so both the claim and the record wrote new entries into
-- every index of the table. Now:
-- * `lease_until` holds a claimed event's lease (the fence of its record, as `visible_at` was); no
--   index covers it. `visible_at` is only ever the time the event is due.
-- * The due and resolved indexes say "unresolved" and "resolved" by `resolved_at` (every statement
--   that resolves an event sets it, every one that reopens one clears it; migration 016). The due
--   index adds `visible_at IS NOT NULL` (always true: the column is NOT NULL; statements imply it by
--   `visible_at <= 'infinity'`, lib/db/due.ts) so that its predicate is not the key index's: the per-entity probe (lib/db/due.ts headOfKey) says nothing of `visible_at`,
--   so only the key index can answer it. With equal predicates the planner answered the probe from
--   the due index, reading a project's whole backlog per candidate (the collapse migration 016 fixed).
-- * Terminal failures are indexed by `failed_at`, set with the failed state and cleared with it.
-- * fillfactor 50: a claim takes the queue's oldest events, whole pages of them at once, and a HOT
--   update needs room on the row's own page for its new version. Measured (bench/lease-design.ts):
--   at 85 only 9-19% of the claims found room; at 50 all did. New pages only: existing ones fill as
--   their rows are deleted by retention.
-- Claimed events now stay in the due index at their due time, and DUE (lib/db/due.ts) reads past
-- those whose lease still runs; 64 of them at the index's head cost nothing measurable.
--
-- Deploy with the code of this migration, back to back: the previous version claims by `visible_at`
-- and `state` alone and would take events another dispatcher holds (at-least-once delivery keeps
-- each event, sent twice at worst), and its records of claims made here find no lease to match (the
-- event's lease runs out, and it is delivered again).
ALTER TABLE actions_event ADD COLUMN lease_until timestamptz, ADD COLUMN failed_at timestamptz;
ALTER TABLE actions_event SET (fillfactor = 50);

-- An event claimed before this migration keeps its lease where its dispatcher's record looks for it,
-- and its visible_at (that lease, until now) becomes a due time no later than now: DUE waits for the
-- lease, and a release, which now only clears the lease, leaves it due at once as before.
UPDATE actions_event SET lease_until = visible_at, visible_at = least(visible_at, now()) WHERE state = 'processing';
UPDATE actions_event SET failed_at = coalesce(resolved_at, last_state_change) WHERE state = 'failed';

DROP INDEX actions_event_due_idx;
CREATE INDEX actions_event_due_idx ON actions_event (project, priority DESC, visible_at, seq) WHERE resolved_at IS NULL AND visible_at IS NOT NULL;
DROP INDEX actions_event_failed_idx;
CREATE INDEX actions_event_failed_idx ON actions_event (project, failed_at) WHERE failed_at IS NOT NULL;
DROP INDEX actions_event_resolved_idx;
CREATE INDEX actions_event_resolved_idx ON actions_event (resolved_at) WHERE resolved_at IS NOT NULL;

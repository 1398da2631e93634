-- Per-entity order. `order_key` names what an event is about: its project, its target and
-- its payload's (entity, id), hashed (lib/enqueue/within.ts) so the index entry is fixed-size whatever the
-- names (a target name from a schema stored before names had a bound may be long), set at enqueue for targets with `ordering: 'entity'` (the default)
-- and NULL for `'none'` and for events stored before this migration (they stay unordered). Events of
-- one (project, order_key) are delivered one at a time in `seq` order: only the key's earliest
-- unresolved event is claimable (lib/db/due.ts, HEAD_OF_KEY). Adding a nullable column rewrites nothing.
ALTER TABLE actions_event ADD COLUMN order_key uuid;

-- "Is there an earlier unresolved event of this key?": one probe per keyed candidate. Partial on the
-- unresolved states, like the due index, so resolved history never grows it.
-- The key alone leads: it already names the project, and a short entry is cheaper to write twice per
-- event (insert, claim).
CREATE INDEX actions_event_key_idx ON actions_event (order_key, seq)
  WHERE order_key IS NOT NULL AND state IN ('created', 'retrying', 'processing');

-- Two changes to the event table, neither of which rewrites it:
--
-- 1. Ids are scoped to their project. The primary key becomes (id, project): the same id in two
--    projects is two events, and one tenant can no longer refuse another's request by sending its ids
--    first. id leads the key, so a lookup by id alone (an operator's `events show <id>`) still reads
--    it. The old key was stricter, so no row can violate the new one: nothing is lost or duplicated.
ALTER TABLE actions_event DROP CONSTRAINT actions_event_pkey;
ALTER TABLE actions_event ADD CONSTRAINT actions_event_pkey PRIMARY KEY (id, project);

-- 2. Enqueue order is kept. Events of one request share one due time (the transaction's now()), and
--    the claim broke that tie by the random id. `seq` is the event's place in arrival order: a request's
--    events take increasing values in the producer's order (lib/db/events.ts), requests in the order
--    the database took them. Rows already stored get no value except due ones, numbered in creation
--    order, so the claim orders every event it can still take; resolved history is left as it is.
CREATE SEQUENCE actions_event_seq AS bigint;
ALTER TABLE actions_event ADD COLUMN seq bigint;
ALTER SEQUENCE actions_event_seq OWNED BY actions_event.seq;
UPDATE actions_event e SET seq = o.n
FROM (SELECT id, project, nextval('actions_event_seq') AS n
      FROM (SELECT id, project FROM actions_event
            WHERE state IN ('created', 'retrying', 'processing')
            ORDER BY created_at, id) due_in_order) o
WHERE e.id = o.id AND e.project = o.project;
ALTER TABLE actions_event ALTER COLUMN seq SET DEFAULT nextval('actions_event_seq');

-- The claim's order (priority desc, due time, arrival) read from the index as it is written.
DROP INDEX actions_event_due_idx;
CREATE INDEX actions_event_due_idx ON actions_event (project, priority DESC, visible_at, seq)
  WHERE state IN ('created', 'retrying', 'processing');

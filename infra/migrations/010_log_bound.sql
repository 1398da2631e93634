-- The attempt log is bounded: it keeps an event's first entry and its last 20, and counts
-- the entries dropped in between here, so a long outage (a held event probed for a week) cannot grow a
-- row without bound, each append rewriting it. Adding a column with a constant default rewrites nothing.
ALTER TABLE actions_event ADD COLUMN log_dropped integer NOT NULL DEFAULT 0;

-- When dispatch last made progress on each project (README: Monitoring): the sweeper's heartbeat
-- reads it while a project has overdue work. One row per project, written by the drain at most
-- once per PROGRESS_INTERVAL_MS (lib/db/progress.ts), so it costs one tiny upsert now and then.

CREATE TABLE actions_dispatch_progress (
  project       text PRIMARY KEY,
  progressed_at timestamptz NOT NULL
);

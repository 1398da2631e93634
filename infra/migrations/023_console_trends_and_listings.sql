-- What the console reads stays cheap however many events a project holds.
--
-- 1. A per-target, per-minute rollup of deliveries, written by the recorder in one small upsert per
--    record statement (lib/db/trends.ts): the Targets and Projects pages draw their charts from at
--    most 1,440 rows per target (24 h of minutes), never from the event table. Request durations are
--    kept as counts per bucket (TREND_BUCKETS_MS in lib/db/trends.ts), so p50 and p99 of a minute, or
--    of several merged, come from a dozen integers. Rows older than a day are deleted by the sweeper,
--    except each target's newest, which says when it last sent a batch ("never sent" without one).
CREATE TABLE actions_target_minute (
  project         text NOT NULL,
  target          text NOT NULL,
  minute          timestamptz NOT NULL,
  -- Requests made (batches posted) in the minute.
  requests        int NOT NULL,
  -- Events delivered (succeed), event attempts that failed, events that failed for good.
  delivered       int NOT NULL,
  failed_attempts int NOT NULL,
  events_failed   int NOT NULL,
  -- Requests by duration bucket; always as long as TREND_BUCKETS_MS plus one (the last is "longer").
  duration_counts int[] NOT NULL,
  PRIMARY KEY (project, target, minute)
);

-- 2. The event listing pages newest change first. A resolved event's last change is its resolution
--    (every statement that resolves one sets resolved_at and last_state_change to the same now()), so
--    resolved events page by this index. It names only columns a claim never writes (project,
--    resolved_at, id), so the claim stays a heap-only (HOT) update (migration 017); every statement
--    that writes resolved_at already updated the resolved index.
CREATE INDEX actions_event_resolved_page_idx ON actions_event (project, resolved_at DESC, id DESC) WHERE resolved_at IS NOT NULL;

-- 3. The listing of one target's resolved events, the same way.
CREATE INDEX actions_event_target_page_idx ON actions_event (project, target, resolved_at DESC, id DESC) WHERE resolved_at IS NOT NULL;

-- The breaker tells a flaky target from a dead one by its failure rate over a window, not only by its
-- failed batches in a row: at low traffic a run of five is mostly one event's own retries, and a
-- receiver answering three requests in four was paused again and again. The window is two buckets
-- (the current one since window_at, and the one before it, weighted down as the current one ages);
-- each counts the batches recorded and those that failed. A target gets its row at its first failure
-- and counts every batch from then on; one that never failed still writes no health row. Adding
-- columns with constant defaults rewrites nothing.
ALTER TABLE actions_target_health
  ADD COLUMN window_at      timestamptz,
  ADD COLUMN window_batches int NOT NULL DEFAULT 0,
  ADD COLUMN window_failed  int NOT NULL DEFAULT 0,
  ADD COLUMN prev_batches   int NOT NULL DEFAULT 0,
  ADD COLUMN prev_failed    int NOT NULL DEFAULT 0;

-- Target health: a circuit breaker per project and target. The claim reads it in the same
-- statement (a paused target's events are not claimed, except one probe batch when probe_at is due);
-- the record statement keeps it (a success resets the run, a failed batch extends it). One small row
-- per target that has ever failed; a target without a row is healthy.

CREATE TABLE actions_target_health (
  project              text NOT NULL,
  target               text NOT NULL,
  -- Failed batches in a row since the last success (the run); 0 when healthy.
  consecutive_failures int NOT NULL DEFAULT 0,
  -- When the current run of failures began (its first failed attempt); NULL when healthy. An event
  -- whose first failed attempt is not older than this has only ever seen the target failing.
  failing_since        timestamptz,
  -- NULL while the target runs; set while it is paused.
  paused_at            timestamptz,
  -- Why it is paused: 'failures' (the breaker), 'gone' (a 410: waits for an operator), 'operator'.
  paused_reason        text CHECK (paused_reason IN ('failures', 'gone', 'operator')),
  -- While paused: when the next probe batch may be claimed; NULL means no probe (gone, operator).
  probe_at             timestamptz,
  -- The current probe interval; doubles after each failed probe up to a cap.
  probe_interval_ms    int,
  updated_at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project, target),
  CHECK ((paused_at IS NULL) = (paused_reason IS NULL))
);

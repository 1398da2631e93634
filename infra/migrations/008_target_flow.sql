-- Per-target caps: `maxInFlight` (requests to a target in flight at once) and
-- `maxPerSecond` (requests started per second), across every drain and environment. The database
-- enforces both (lib/db/flow.ts): a claim of a capped target first locks the target's row here, so
-- such claims run one at a time, each seeing what the one before it took. One small row per capped
-- target; uncapped targets never get one.
CREATE TABLE actions_target_flow (
  project       text NOT NULL,
  target        text NOT NULL,
  -- The rate's schedule: the earliest time the next request may start (a GCRA theoretical arrival
  -- time); NULL or past means one may start now.
  next_start_at timestamptz,
  -- The requests granted and maybe still in flight: [{ "id": first event of the batch, "lease" }].
  -- One is in flight while that event is still `processing` under that lease; at most maxInFlight
  -- entries, so counting them is that many key lookups, and records never touch this row.
  in_flight     jsonb NOT NULL DEFAULT '[]',
  -- The last claim for the target: while it is recent, dispatch is working through the target's
  -- backlog at the pace the caps allow, and the sweeper's oldest-due age leaves that backlog out.
  claimed_at    timestamptz,
  PRIMARY KEY (project, target)
);

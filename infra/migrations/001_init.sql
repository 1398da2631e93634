-- Event store, per-project variables and versioned actions schemas (README: Architecture).

CREATE TYPE actions_event_state AS ENUM ('created', 'retrying', 'processing', 'succeed', 'failed', 'stopped');

CREATE TABLE actions_event (
  id                uuid PRIMARY KEY,
  project           text NOT NULL,
  transaction_id    uuid NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  resolved_at       timestamptz,
  visible_at        timestamptz NOT NULL DEFAULT now(),
  num_retries       integer NOT NULL DEFAULT 0,
  state             actions_event_state NOT NULL DEFAULT 'created',
  last_state_change timestamptz NOT NULL DEFAULT now(),
  stage             text,
  schema_version    integer NOT NULL,
  target            text NOT NULL,
  trigger           text NOT NULL,
  priority          integer NOT NULL DEFAULT 0,
  payload           jsonb NOT NULL,
  log               jsonb NOT NULL DEFAULT '[]'::jsonb,
  identity_id       uuid,
  ip_address        text,
  user_agent        text
);

-- The claim query: most urgent due event of a project (priority desc, then due time).
-- Partial on the due states, so resolved history never bloats the hot index.
CREATE INDEX actions_event_due_idx ON actions_event (project, priority DESC, visible_at)
  WHERE state IN ('created', 'retrying', 'processing');

-- Operator listings of terminal failures, and the sweeper's failed-events gauge.
CREATE INDEX actions_event_failed_idx ON actions_event (project, last_state_change)
  WHERE state = 'failed';

-- Retention deletes resolved events oldest first.
CREATE INDEX actions_event_resolved_idx ON actions_event (resolved_at)
  WHERE state IN ('succeed', 'stopped', 'failed');

CREATE TABLE actions_variable (
  project text NOT NULL,
  name    text NOT NULL,
  value   text NOT NULL,
  PRIMARY KEY (project, name)
);

CREATE TABLE actions_schema (
  project    text NOT NULL,
  version    integer NOT NULL,
  schema     jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project, version)
);

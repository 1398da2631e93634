-- The relay (lib/relay/, docs/contember-relay.md) moves rows of a Contember engine's outbox into
-- actions_event. A row it cannot take (unknown target or trigger, a payload past a bound) stays in the
-- engine's outbox, untouched; this table says which and why, for an operator (`actions relay refused`),
-- and lets the relay skip those rows so they never crowd out the rows behind them. A row is forgotten
-- here once it has moved, or when the project's schema changes (the relay then looks at it again).
CREATE TABLE actions_relay_refused (
  project          text NOT NULL,
  event_id         uuid NOT NULL,
  target           text NOT NULL,
  trigger          text NOT NULL,
  reason           text NOT NULL,
  first_refused_at timestamptz NOT NULL DEFAULT now(),
  last_refused_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project, event_id)
);

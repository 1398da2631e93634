-- Circuit breaker: when did the event's current run of failed attempts begin? The breaker
-- keeps an event from failing terminally only while every attempt to its target since that moment has
-- failed too (actions_target_health.failing_since <= first_failed_at). Log entries carry no time (their
-- shape is upstream's), and created_at is no substitute: a backlog written before an outage but first
-- attempted during it would lose that protection. Set by the record statement at an event's first
-- failed attempt, cleared by a success. Adding a nullable column rewrites nothing.
ALTER TABLE actions_event ADD COLUMN first_failed_at timestamptz;

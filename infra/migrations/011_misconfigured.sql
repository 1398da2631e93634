-- Three kinds of failed attempt: a target that answers 401, redirects, or is refused by the
-- egress guard is not down but misconfigured. After the breaker's threshold it pauses for an operator
-- (reason 'misconfigured', no probe) with what it answered kept in pause_detail ('401', 'Destination
-- not allowed'; never a URL, a header or a variable value).
ALTER TABLE actions_target_health DROP CONSTRAINT actions_target_health_paused_reason_check;
ALTER TABLE actions_target_health ADD CONSTRAINT actions_target_health_paused_reason_check
  CHECK (paused_reason IN ('failures', 'gone', 'operator', 'misconfigured'));
ALTER TABLE actions_target_health ADD COLUMN pause_detail text;

-- The breaker's first probe: a failure recorded while a target is paused doubled its probe
-- interval as a failed probe, but on a cold drain the batches already in flight when the target paused
-- fail after the pause too, so the interval doubled before any probe was sent (the first probe came at
-- 2 x BREAKER_PROBE_MS). The claim now notes when it takes a probe batch; only a failure after that
-- counts as the probe's, once. Adding a nullable column rewrites nothing.
ALTER TABLE actions_target_health ADD COLUMN probe_claimed_at timestamptz;

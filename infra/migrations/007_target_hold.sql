-- A receiver that says "slow down" slows the whole target: a 429 or 503 with
-- Retry-After holds every batch of the target, in every drain, until the time it asked for (capped
-- by RETRY_AFTER_MAX_MS). The record statement sets it, the claim leaves the target's events alone
-- while it is in the future, and they spend no attempt meanwhile. Adding a nullable column rewrites
-- nothing.
ALTER TABLE actions_target_health ADD COLUMN hold_until timestamptz;

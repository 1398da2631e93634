-- A poison event cannot hold its batch: when a batch of several events fails as a whole
-- (rejected, or on a probe), each of its events may travel next in a batch of at most half its size
-- (`batch_cap`), down to one, so the bad event fails alone and its neighbours are delivered. NULL:
-- the target's batchSize. Adding a nullable column rewrites nothing.
ALTER TABLE actions_event ADD COLUMN batch_cap integer;

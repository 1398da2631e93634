-- The W3C trace context an event was enqueued in (the actions.enqueue span's traceparent, and the
-- producer's tracestate), so its webhook span links back to the mutation's trace (docs/operations.md,
-- Tracing). Written only while tracing is on; NULL otherwise. Adding nullable columns without a
-- default rewrites nothing, and the running code neither reads nor writes them: backward compatible.
ALTER TABLE actions_event ADD COLUMN traceparent text, ADD COLUMN tracestate text;

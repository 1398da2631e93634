-- When each variable last changed, so the admin API and the CLI can show names with their change time
-- and never the value. Existing rows get the migration's time. Backward compatible: the running code's
-- inserts take the default and its updates leave the column as it was.
ALTER TABLE actions_variable ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

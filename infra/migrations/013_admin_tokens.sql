-- Per-project tokens of the admin API. A token is shown once, when it is created; only
-- its SHA-256 hash is kept, so a copy of this table lets no one in. Revoking sets revoked_at and keeps
-- the row, so `tokens list` still shows who had access and until when. A new table only: nothing
-- older reads or changes.
CREATE TABLE actions_admin_token (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  project     text NOT NULL,
  role        text NOT NULL CHECK (role IN ('admin', 'deployer', 'viewer')),
  name        text,
  token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);

-- `tokens list <project>`, newest first.
CREATE INDEX actions_admin_token_project_idx ON actions_admin_token (project, created_at DESC);

-- The Management API (contract section 11): the deployment's organisation,
-- management keys, what a team carries for it, and webhook endpoints.

-- One deployment is one organisation: one row, made with the database (or by
-- this migration on an older one) and never changed but for its name.
CREATE TABLE org (
  org_id        uuid PRIMARY KEY,
  name          text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- Signs the Management API's list cursors (src/management/cursor.ts), so
  -- that a cursor altered by a client, or made for another list, is refused.
  -- Shared by every instance; 244 random bits from PostgreSQL's strong
  -- random source (two v4 UUIDs).
  cursor_secret bytea NOT NULL,
  -- At most one row.
  only_one      boolean NOT NULL DEFAULT true UNIQUE CHECK (only_one)
);
INSERT INTO org (org_id, name, cursor_secret)
VALUES (gen_random_uuid(), 'Organization',
        decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- Keys of the Management API (header X-Management-Key): issued and revoked by
-- the admin CLI only, like team keys stored as a SHA-256 only, with a prefix
-- of their own (hdsm_) so that neither kind of key can pass for the other.
CREATE TABLE management_keys (
  key_id         uuid PRIMARY KEY,
  org_id         uuid NOT NULL REFERENCES org,
  label          text NOT NULL,
  display_prefix text NOT NULL,
  key_hash       bytea NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  revoked_at     timestamptz,
  last_used_at   timestamptz
);

-- The team's id in the operator's own systems (the upstream's integration_team_id).
ALTER TABLE teams ADD COLUMN integration_team_id text;
-- Lists page by key (created_at, team_id): a page deep in the list reads what the first one does.
CREATE INDEX teams_list ON teams (created_at, team_id);

-- A team's keys go with the team; listed by key, per team or for the whole organisation.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_team_id_fkey,
  ADD CONSTRAINT api_keys_team_id_fkey FOREIGN KEY (team_id) REFERENCES teams ON DELETE CASCADE;
CREATE INDEX api_keys_team_list ON api_keys (team_id, created_at, key_id);
DROP INDEX api_keys_team;
CREATE INDEX api_keys_list ON api_keys (created_at, key_id);

-- Where a team's events are sent (delivery: the events issue). Go with the team.
CREATE TABLE webhook_endpoints (
  endpoint_id  uuid PRIMARY KEY,
  team_id      uuid NOT NULL REFERENCES teams ON DELETE CASCADE,
  url          text NOT NULL,
  description  text NOT NULL DEFAULT '',
  -- Messages per second; null: no limit.
  rate_limit   int CHECK (rate_limit > 0),
  disabled     boolean NOT NULL DEFAULT false,
  -- Event types sent to it; null: every type.
  filter_types text[],
  -- Custom headers sent with every delivery, {name: value}. Never logged.
  headers      jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_team_list ON webhook_endpoints (team_id, created_at, endpoint_id);

-- An endpoint's signing secrets: the current one (expires_at null) and, for
-- 24 hours after a rotation, the ones it replaced. Every secret not yet
-- expired signs each delivery. Never logged.
CREATE TABLE webhook_secrets (
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at  timestamptz
);
CREATE INDEX webhook_secrets_endpoint ON webhook_secrets (endpoint_id);
CREATE UNIQUE INDEX webhook_secrets_one_current ON webhook_secrets (endpoint_id) WHERE expires_at IS NULL;

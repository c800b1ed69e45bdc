-- Teams, their API keys, and their users. Every user-facing row carries
-- team_id, the tenant key: every query filters on it, and it is the
-- distribution column if the schema is ever sharded (docs/scaling.md).

CREATE TABLE teams (
  team_id    uuid PRIMARY KEY,
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Exact number of users, kept in the same transaction as every insert, so
  -- that `total` costs one row read whatever the team's size.
  user_count bigint NOT NULL DEFAULT 0
);

CREATE TABLE api_keys (
  key_id         uuid PRIMARY KEY,
  team_id        uuid NOT NULL REFERENCES teams,
  name           text NOT NULL,
  -- The first characters of the key, shown in listings to tell keys apart.
  display_prefix text NOT NULL,
  -- SHA-256 of the whole key; the key itself is never stored.
  key_hash       bytea NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz,
  revoked_at     timestamptz,
  last_used_at   timestamptz
);
CREATE INDEX api_keys_team ON api_keys (team_id);

-- Catalogue of data sources (Oura, Garmin, ...).
CREATE TABLE sources (
  source_id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  slug      text NOT NULL UNIQUE,
  name      text NOT NULL,
  logo      text NOT NULL
);

-- users and user_sources carry no foreign keys: a foreign key is checked by
-- a trigger per inserted row, and that made the bulk import 1.5x (users) and
-- 4.4x (user_sources) slower (measured on 200k users). Every writer of these
-- tables is in src/users/ and writes the parent rows first, in the same
-- transaction, with the team row locked.
CREATE TABLE users (
  user_id        uuid PRIMARY KEY,
  team_id        uuid NOT NULL,
  client_user_id text NOT NULL,
  created_on     timestamptz NOT NULL,
  -- 1-based rank of the user in the team's list order (created_on, user_id).
  -- Paging reads positions offset+1 .. offset+limit through an index, so a
  -- page costs the same at any offset. Writers keep it dense (src/users/).
  position       bigint NOT NULL,
  fallback_time_zone              text,
  fallback_time_zone_source       text,
  fallback_time_zone_updated_at   timestamptz,
  fallback_birth_date             date,
  fallback_birth_date_source      text,
  fallback_birth_date_updated_at  timestamptz,
  ingestion_start date,
  ingestion_end   date,
  CONSTRAINT users_client_user_id_unique UNIQUE (team_id, client_user_id),
  CONSTRAINT users_time_zone_complete CHECK ((fallback_time_zone IS NULL) = (fallback_time_zone_updated_at IS NULL)),
  CONSTRAINT users_birth_date_complete CHECK ((fallback_birth_date IS NULL) = (fallback_birth_date_updated_at IS NULL))
);
CREATE INDEX users_team_position ON users (team_id, position);

-- The sources each user has connected, and when.
CREATE TABLE user_sources (
  user_id    uuid NOT NULL,
  source_id  int NOT NULL,
  created_on timestamptz NOT NULL,
  PRIMARY KEY (user_id, source_id)
);

-- The API's User object computed from the normalized tables. row_to_json keeps the column order (the
-- contract's key order) and writes no spaces; to_json of a timestamptz in a
-- UTC session gives ISO 8601 with "+00:00" and the stored fractional seconds.
CREATE VIEW user_documents AS
SELECT u.team_id, u.user_id, u.client_user_id, u.position, row_to_json(d)::text AS doc
FROM users u
CROSS JOIN LATERAL (
  SELECT
    u.user_id,
    u.team_id,
    u.client_user_id,
    u.created_on,
    COALESCE((
      SELECT ('[' || string_agg(x.doc, ',' ORDER BY x.created_on, x.slug) || ']')::json
      FROM (
        SELECT us.created_on, s.slug, row_to_json(c)::text AS doc
        FROM user_sources us
        -- LATERAL pins the join order: the user's few links first, then one catalogue row each.
        CROSS JOIN LATERAL (SELECT s.slug, row_to_json(src) AS doc
                            FROM sources s CROSS JOIN LATERAL (SELECT s.name, s.slug, s.logo) src
                            WHERE s.source_id = us.source_id) s
        CROSS JOIN LATERAL (SELECT us.created_on, s.doc AS source, s.doc AS provider) c
        WHERE us.user_id = u.user_id
      ) x
    ), '[]'::json) AS connected_sources,
    CASE WHEN u.fallback_time_zone IS NOT NULL THEN (
      SELECT row_to_json(z) FROM (SELECT u.fallback_time_zone AS id, u.fallback_time_zone_source AS source_slug,
                                         u.fallback_time_zone_updated_at AS updated_at) z
    ) END AS fallback_time_zone,
    CASE WHEN u.fallback_birth_date IS NOT NULL THEN (
      SELECT row_to_json(z) FROM (SELECT u.fallback_birth_date AS value, u.fallback_birth_date_source AS source_slug,
                                         u.fallback_birth_date_updated_at AS updated_at) z
    ) END AS fallback_birth_date,
    u.ingestion_start,
    u.ingestion_end
) d;

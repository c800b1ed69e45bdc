-- list_page_start's first two steps become one binary search each
-- (PostgreSQL's width_bucket) over thresholds kept sorted: for every block
-- of the team, and for every bucket of a block, how many live users lie
-- before it. 013 summed the team's block counts (one aggregate over all its
-- block rows) and a block's bucket counts in PL/pgSQL loops, some 80 µs a
-- call on a team with a tenth deleted; this reads two small rows by key and
-- searches them (docs/decisions/page-statement.md has the figures).
--
-- A delete (an undo) leaves one live user fewer (more) before every later
-- unit: it shifts the thresholds after the hole's block in the team's row,
-- and after the hole's bucket in the block's row. The thresholds of units
-- past the team's last block with holes are never read: the search returns
-- the last element, and the user lies past it with every hole before it.

-- Positions per block of buckets: the unit of list_hole_teams.block_starts.
CREATE FUNCTION list_block_positions() RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT list_block_size()::bigint * list_bucket_size() $$;

-- `starts` with every element after the `unit`-th moved by `by`.
CREATE FUNCTION list_starts_shifted(starts bigint[], unit int, by int) RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT array_agg(s + CASE WHEN k > unit THEN by ELSE 0 END ORDER BY k)
  FROM unnest(starts) WITH ORDINALITY AS u(s, k)
$$;

-- `starts` (of units of `unit_size` positions, never empty) grown to `units`
-- elements: no hole between its last unit and the new ones.
CREATE FUNCTION list_starts_extended(starts bigint[], units int, unit_size bigint) RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT starts || array(SELECT starts[cardinality(starts)] + k * unit_size
                         FROM generate_series(1, units - cardinality(starts)) AS k)
$$;

-- Live users before each of the team's blocks 1 .. n + 1, n its last block
-- with holes: (k - 1) * positions per block minus the holes in blocks < k.
CREATE TABLE list_hole_teams (
  team_id      uuid PRIMARY KEY,
  block_starts bigint[] NOT NULL
) WITH (fillfactor = 70); -- room for an update on its own page (HOT): each delete and undo rewrites the row

-- A block's thresholds: live users of the block before each of its buckets,
-- (k - 1) * list_bucket_size() minus the holes in its buckets < k.
ALTER TABLE list_hole_blocks ADD COLUMN bucket_starts bigint[];

-- Both as list_holes holds them: for the recount and `hds check`.
CREATE FUNCTION list_block_starts_of(team uuid) RETURNS bigint[]
LANGUAGE sql STABLE AS $$
  SELECT array_agg((g.k - 1) * list_block_positions()
                   - coalesce((SELECT sum(b.holes) FROM list_hole_blocks b WHERE b.team_id = team AND b.block < g.k), 0)
                   ORDER BY g.k)
  FROM generate_series(1, (SELECT max(b.block) + 1 FROM list_hole_blocks b WHERE b.team_id = team AND b.holes > 0)) AS g(k)
$$;

CREATE FUNCTION list_bucket_starts_of(team uuid, block int) RETURNS bigint[]
LANGUAGE sql STABLE AS $$
  SELECT array_agg((g.k - 1)::bigint * list_bucket_size()
                   - coalesce((SELECT sum(cardinality(h.holes)) FROM list_holes h
                               WHERE h.team_id = team AND h.bucket >= (block - 1) * list_block_size() + 1
                                 AND h.bucket < (block - 1) * list_block_size() + g.k), 0)
                   ORDER BY g.k)
  FROM generate_series(1, list_block_size()) AS g(k)
$$;

UPDATE list_hole_blocks b SET bucket_starts = list_bucket_starts_of(b.team_id, b.block);
ALTER TABLE list_hole_blocks ALTER COLUMN bucket_starts SET NOT NULL;
ALTER TABLE list_hole_blocks DROP COLUMN bucket_holes;
DROP FUNCTION list_block_buckets(uuid, int);
DROP FUNCTION list_block_with_hole(int);

INSERT INTO list_hole_teams (team_id, block_starts)
SELECT t.team_id, list_block_starts_of(t.team_id)
FROM (SELECT DISTINCT team_id FROM list_hole_blocks WHERE holes > 0) t;

-- As in 012 and 013: the position of the team's live user at `skip`
-- (0-based), skip + 1 plus the holes before it. The last block with at most
-- `skip` live users before it, then the last bucket of that block with at
-- most the rest before it (width_bucket: how many of the sorted thresholds
-- are at most the value); then, inside the bucket, the holes whose offset
-- minus the holes before them is at most what is left, a prefix of its
-- sorted holes, found by bisection. `team_holes` is no longer read: the
-- signature stays, and with it the page statement.
CREATE OR REPLACE FUNCTION list_page_start(team uuid, skip bigint, team_holes bigint) RETURNS bigint
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
  starts bigint[]; user_block int; user_bucket int;
  before bigint;  -- holes before the unit found so far
  rest bigint;    -- live users of that unit before the user
  holes smallint[]; lo int; hi int; mid int;
BEGIN
  SELECT t.block_starts INTO starts FROM list_hole_teams t WHERE t.team_id = team;
  IF starts IS NULL THEN RETURN skip + 1; END IF;
  user_block := width_bucket(skip, starts);
  before := (user_block - 1) * list_block_positions() - starts[user_block];
  rest := skip - starts[user_block];

  SELECT b.bucket_starts INTO starts FROM list_hole_blocks b WHERE b.team_id = team AND b.block = user_block;
  IF starts IS NULL THEN RETURN skip + 1 + before; END IF;
  user_bucket := width_bucket(rest, starts);
  before := before + (user_bucket - 1)::bigint * list_bucket_size() - starts[user_bucket];
  rest := rest - starts[user_bucket];
  user_bucket := (user_block - 1) * list_block_size() + user_bucket;

  SELECT h.holes INTO holes FROM list_holes h WHERE h.team_id = team AND h.bucket = user_bucket;
  lo := 0; hi := coalesce(cardinality(holes), 0);
  WHILE lo < hi LOOP
    mid := (lo + hi + 1) / 2;
    IF holes[mid] - (mid - 1) <= rest THEN lo := mid; ELSE hi := mid - 1; END IF;
  END LOOP;
  RETURN skip + 1 + before + lo;
END $$;

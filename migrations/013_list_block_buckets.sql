-- A page's start after deletions read, in its second step, up to 64 rows of
-- list_holes (every bucket of one block) to sum their holes. Each block now
-- keeps its buckets' hole counts in an array, so that step reads the block's
-- own row; and list_page_start walks its steps in PL/pgSQL loops over
-- arrays instead of window sums (docs/decisions/page-statement.md has the
-- figures). The mechanism is the same three steps (src/users/README.md).

-- STRICT, so that the SQL functions built on them (list_bucket_of,
-- list_offset_of, list_block_of and those below) are inlined into the
-- statements that call them: PostgreSQL inlines a STRICT SQL function only
-- when its body calls strict functions alone, and ran each call as a
-- function of its own (some 5 µs: list_holes_of paid it per position).
CREATE OR REPLACE FUNCTION list_bucket_size() RETURNS int LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT 256 $$;
CREATE OR REPLACE FUNCTION list_block_size() RETURNS int LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT 64 $$;

-- The bucket's place in its block, 1 .. list_block_size().
CREATE FUNCTION list_bucket_in_block(bucket int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT (bucket - 1) % list_block_size() + 1 $$;

-- A block's hole counts per bucket as list_holes holds them (the recount, and `hds check`).
CREATE FUNCTION list_block_buckets(team uuid, block int) RETURNS int[]
LANGUAGE sql STABLE AS $$
  SELECT array_agg(coalesce(cardinality(h.holes), 0) ORDER BY g.k)
  FROM generate_series(1, list_block_size()) AS g(k)
  LEFT JOIN list_holes h ON h.team_id = team AND h.bucket = (block - 1) * list_block_size() + g.k
$$;

-- The counts of a block whose only hole is in `bucket` (a delete opening the block's first hole).
CREATE FUNCTION list_block_with_hole(bucket int) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT array_fill(0, ARRAY[list_bucket_in_block(bucket) - 1]) || 1
         || array_fill(0, ARRAY[list_block_size() - list_bucket_in_block(bucket)])
$$;

ALTER TABLE list_hole_blocks ADD COLUMN bucket_holes int[];
UPDATE list_hole_blocks b SET bucket_holes = list_block_buckets(b.team_id, b.block);
ALTER TABLE list_hole_blocks ALTER COLUMN bucket_holes SET NOT NULL;

-- As in 012: the position of the team's live user at `skip` (0-based),
-- skip + 1 plus the holes before it. Each step takes the last unit (block,
-- then bucket of that block) with at most `skip` live users before it: a
-- unit's first position - 1 minus the holes before it, which never falls
-- from one unit to the next, so each loop stops at the first unit past it.
-- Inside the bucket the user lies past every hole whose offset minus the
-- holes before it is at most the rest. No block past skip + 1 + the team's
-- holes is read: the user cannot lie further on.
CREATE OR REPLACE FUNCTION list_page_start(team uuid, skip bigint, team_holes bigint) RETURNS bigint
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
  bucket_size constant bigint := list_bucket_size();
  block_size constant int := list_block_size();
  blocks int[]; counts int[]; k int;
  before bigint := 0;
  user_block int := 0; block_before bigint := 0;
  user_bucket int := 0; bucket_before bigint := 0;
  holes smallint[]; rest bigint;
BEGIN
  SELECT array_agg(b.block ORDER BY b.block), array_agg(b.holes ORDER BY b.block) INTO blocks, counts
  FROM list_hole_blocks b
  WHERE b.team_id = team AND b.block <= list_block_of(list_bucket_of(skip + 1 + team_holes));
  FOR k IN 1 .. coalesce(cardinality(blocks), 0) LOOP
    EXIT WHEN (blocks[k] - 1) * block_size * bucket_size - before > skip;
    user_block := blocks[k]; block_before := before;
    before := before + counts[k];
  END LOOP;
  IF user_block = 0 THEN RETURN skip + 1; END IF;

  SELECT b.bucket_holes INTO counts FROM list_hole_blocks b WHERE b.team_id = team AND b.block = user_block;
  before := block_before;
  FOR k IN 1 .. block_size LOOP
    EXIT WHEN ((user_block - 1) * block_size + k - 1) * bucket_size - before > skip;
    IF counts[k] > 0 THEN
      user_bucket := (user_block - 1) * block_size + k; bucket_before := before;
      before := before + counts[k];
    END IF;
  END LOOP;
  IF user_bucket = 0 THEN RETURN skip + 1 + block_before; END IF;

  SELECT h.holes INTO holes FROM list_holes h WHERE h.team_id = team AND h.bucket = user_bucket;
  rest := skip - ((user_bucket - 1) * bucket_size - bucket_before);
  before := bucket_before;
  FOR k IN 1 .. coalesce(cardinality(holes), 0) LOOP
    EXIT WHEN holes[k] - (k - 1) > rest;
    before := before + 1;
  END LOOP;
  RETURN skip + 1 + before;
END $$;

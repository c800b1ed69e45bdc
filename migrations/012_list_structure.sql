-- Where a page starts after deletions becomes one mechanism, one SQL
-- query (list_page_start below; src/users/README.md says how): the team's
-- holes per bucket of 256 positions (list_holes, 008), and now their count
-- per block of 64 buckets (list_hole_blocks). A page sums the block counts
-- to find its block, the bucket counts inside that block to find its
-- bucket, and the bucket's holes to find its position.
--
-- The Fenwick tree in teams.list_tree (005) goes, with list_seek (007) and
-- the functions that kept it: every page read detoasted it and every delete
-- rewrote the whole array in the team's row.

CREATE TABLE list_hole_blocks (
  team_id uuid NOT NULL,
  -- Block k holds buckets (k - 1) * list_block_size() + 1 .. k * list_block_size().
  block   int NOT NULL,
  -- Holes in the block's buckets: the sum of cardinality(list_holes.holes) over them.
  holes   int NOT NULL,
  PRIMARY KEY (team_id, block)
) WITH (fillfactor = 70); -- room for an update on its own page (HOT): each delete and undo rewrites a row

CREATE FUNCTION list_block_size() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 64 $$;

CREATE FUNCTION list_block_of(bucket int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT (bucket - 1) / list_block_size() + 1 $$;

-- The position of the team's live user at `skip` (0-based): skip + 1 plus
-- the holes before it. Each step takes the last unit (block, then bucket of
-- that block) with at most `skip` live users before it: a unit's first
-- position - 1 minus the holes before it. Inside the bucket the user lies
-- past every hole whose offset minus the holes before it is at most the
-- rest. Each step picks its row in a subquery of its own (ORDER BY … LIMIT
-- 1), so that the step below runs once, for that row alone. A step reads no
-- unit past skip + 1 + the holes that can lie before it (the team's
-- `team_holes`, then the block's): the user cannot be further on.
--
-- PL/pgSQL only to keep the query's plan for the session: inside the page
-- statement its planning (about 0.5 ms) came back on every page of a small
-- limit, for which PostgreSQL's plan cache prefers a custom plan.
CREATE FUNCTION list_page_start(team uuid, skip bigint, team_holes bigint) RETURNS bigint
LANGUAGE plpgsql STABLE STRICT AS $$
BEGIN
  RETURN skip + 1 + coalesce((
    SELECT coalesce((
      SELECT k.before + (
        SELECT count(*) FROM unnest(k.holes) WITH ORDINALITY AS x(o, i)
        WHERE x.o - x.i + 1 <= skip - ((k.bucket - 1)::bigint * list_bucket_size() - k.before))
      FROM (
        SELECT w.bucket, w.holes, w.before FROM (
          SELECT h.bucket, h.holes, b.before + sum(cardinality(h.holes)) OVER (ORDER BY h.bucket) - cardinality(h.holes) AS before
          FROM list_holes h
          WHERE h.team_id = team AND h.bucket BETWEEN (b.block - 1) * list_block_size() + 1 AND b.block * list_block_size()
            AND h.bucket <= list_bucket_of(skip + 1 + b.before + b.holes)
        ) w
        WHERE (w.bucket - 1)::bigint * list_bucket_size() - w.before <= skip
        ORDER BY w.bucket DESC LIMIT 1
      ) k), b.before)
    FROM (
      SELECT w.block, w.before, w.holes FROM (
        SELECT block, holes, sum(holes) OVER (ORDER BY block) - holes AS before
        FROM list_hole_blocks WHERE team_id = team AND block <= list_block_of(list_bucket_of(skip + 1 + team_holes))
      ) w
      WHERE (w.block - 1)::bigint * list_block_size() * list_bucket_size() - w.before <= skip
      ORDER BY w.block DESC LIMIT 1
    ) b), 0);
END $$;

INSERT INTO list_hole_blocks (team_id, block, holes)
SELECT team_id, list_block_of(bucket), sum(cardinality(holes))
FROM list_holes GROUP BY 1, 2;

-- Buckets whose holes were all filled again (undos) carry nothing.
DELETE FROM list_holes WHERE holes = '{}';

ALTER TABLE teams DROP COLUMN list_tree;
DROP FUNCTION list_seek(int[], bigint);
DROP FUNCTION list_tree_dense(bigint);
DROP FUNCTION list_tree_of(uuid);
DROP FUNCTION list_add_range(int[], bigint, int);
DROP FUNCTION list_add(int[], bigint, int);
DROP FUNCTION list_build(int[]);
DROP FUNCTION list_prefix(int[], int);

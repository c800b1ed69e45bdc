-- Where a page starts after deletions becomes one mechanism, in the page
-- statement's own SQL (src/users/queries.ts; src/users/README.md says how):
-- the team's holes per bucket of 256 positions (list_holes, 008), and now
-- their count per block of 64 buckets (list_hole_blocks). A page sums the
-- block counts to find its block, the bucket counts inside that block to
-- find its bucket, and the bucket's holes to find its position.
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

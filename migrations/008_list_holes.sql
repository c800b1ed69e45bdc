-- A page of a team with holes found its bucket through the team's tree
-- (list_seek, migrations/007) and then skipped the bucket's live users
-- before its start in the (team_id, position) index: half a bucket, 128
-- index entries, on average. Those are index-only reads only where VACUUM
-- has marked the heap pages all-visible; the deletes that made the holes
-- cleared that mark on nearly every heap page of the team, so until the next
-- VACUUM each entry skipped also read its heap row. With a tenth of a team
-- deleted and no VACUUM since, a random page of it cost PostgreSQL 1.4 times
-- one of a team without holes, 1.2 times once vacuumed (figures in
-- CHANGELOG.md, issue 17).
--
-- Each team now keeps, per bucket that has any, the bucket's holes: the
-- offsets of its positions that no live user holds. The start of a page is
-- then arithmetic: the user at `rest` in its bucket (0-based among the
-- bucket's live users) lies at offset rest + #{i : holes[i] - (i - 1) <= rest}
-- (holes[i] - (i - 1) is how many live users come before the i-th hole).
-- One row read by its key, whatever the state of the visibility map.

CREATE TABLE list_holes (
  team_id uuid NOT NULL,
  -- As in list_tree: bucket b holds positions (b - 1) * list_bucket_size() + 1 .. b * list_bucket_size().
  bucket  int NOT NULL,
  -- Offsets in the bucket (0 .. list_bucket_size() - 1), ascending, of its positions below the team's
  -- next_position that no live user holds (scheduled for deletion, or purged). Empty once undos refill them.
  holes   smallint[] NOT NULL,
  PRIMARY KEY (team_id, bucket)
) WITH (fillfactor = 70); -- room for an update on its own page (HOT): each delete and undo rewrites a row

CREATE FUNCTION list_bucket_of(user_position bigint) RETURNS int
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT ((user_position - 1) / list_bucket_size() + 1)::int $$;

CREATE FUNCTION list_offset_of(user_position bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT ((user_position - 1) % list_bucket_size())::smallint $$;

-- The team's holes per bucket as its users stand (after a renumbering or an import, and to check the kept ones).
CREATE FUNCTION list_holes_of(team uuid) RETURNS TABLE (bucket int, holes smallint[])
LANGUAGE sql STABLE AS $$
  SELECT list_bucket_of(g.p), array_agg(list_offset_of(g.p) ORDER BY g.p)
  FROM teams t CROSS JOIN LATERAL generate_series(1, t.next_position - 1) AS g(p)
  WHERE t.team_id = team
    AND NOT EXISTS (SELECT 1 FROM users u WHERE u.team_id = team AND u.position = g.p)
  GROUP BY 1
$$;

-- Replaces the team's kept holes with its holes as its users stand.
CREATE FUNCTION list_holes_rebuild(team uuid) RETURNS void
LANGUAGE sql AS $$
  DELETE FROM list_holes WHERE team_id = team;
  INSERT INTO list_holes (team_id, bucket, holes) SELECT team, h.bucket, h.holes FROM list_holes_of(team) h;
$$;

-- Existing teams; one whose positions have no holes has no rows.
INSERT INTO list_holes (team_id, bucket, holes)
SELECT t.team_id, h.bucket, h.holes
FROM teams t CROSS JOIN LATERAL list_holes_of(t.team_id) h
WHERE t.user_count <> t.next_position - 1;

-- Buckets whose kept holes differ from the team's holes as its users stand (0 when every write kept them right).
CREATE FUNCTION list_holes_miscounted(team uuid) RETURNS bigint
LANGUAGE sql STABLE AS $$
  WITH counted AS (SELECT * FROM list_holes_of(team)),
  kept AS (SELECT bucket, holes FROM list_holes WHERE team_id = team AND holes <> '{}')
  SELECT count(*) FROM ((SELECT * FROM kept EXCEPT SELECT * FROM counted) UNION ALL (SELECT * FROM counted EXCEPT SELECT * FROM kept)) d
$$;

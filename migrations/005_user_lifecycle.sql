-- Users change and leave: deletion with a grace period, paging that stays
-- offset-independent when users leave the middle of a team, and the counts
-- of GET /v2/user/metrics kept rather than counted per request.

-- A deleted user is moved here at once (out of the list, its client_user_id
-- free again) and waits for the grace period (DELETION_GRACE), then is
-- purged: this row is deleted. Undo moves it back to users, at its position.
-- The same columns as users, plus when and by which key it was deleted.
CREATE TABLE deleted_users (
  user_id        uuid PRIMARY KEY,
  team_id        uuid NOT NULL,
  client_user_id text COLLATE "C" NOT NULL,
  created_on     timestamptz NOT NULL,
  position       bigint NOT NULL,
  fallback_time_zone              text,
  fallback_time_zone_source       text,
  fallback_time_zone_updated_at   timestamptz,
  fallback_birth_date             date,
  fallback_birth_date_source      text,
  fallback_birth_date_updated_at  timestamptz,
  ingestion_start date,
  ingestion_end   date,
  -- The document it is restored with: as it was, without connected sources.
  doc            text NOT NULL,
  deleted_at     timestamptz NOT NULL,
  -- The key that asked for the deletion (its id, never the key), for the purge's log line.
  deleted_by_key uuid
);
CREATE INDEX deleted_users_team_client_user_id ON deleted_users (team_id, client_user_id);
CREATE INDEX deleted_users_team_position ON deleted_users (team_id, position);
CREATE INDEX deleted_users_deleted_at ON deleted_users (deleted_at);

-- Positions are no longer dense once users leave: a deleted user leaves a
-- hole (rewriting every later position would make a delete in a big team
-- cost as much as the team). Positions still order the team's users
-- (live and scheduled for deletion) by (created_on, user_id), and are never
-- handed out twice: next_position is the next one.
--
-- To find page P without counting the users before it, each team keeps a
-- Fenwick tree (binary indexed tree) of its live users per bucket of 256
-- consecutive positions: list_tree[i] holds the live users of buckets
-- (i - lowbit(i), i]. A delete or an undo changes about log2(buckets)
-- entries (the same for the first user as for the last); finding the bucket
-- of the user at a given offset reads as many. A team without holes
-- (user_count = next_position - 1) needs no tree: offset o starts at
-- position o + 1.
ALTER TABLE teams ADD COLUMN next_position bigint NOT NULL DEFAULT 1;
ALTER TABLE teams ADD COLUMN list_tree int[] NOT NULL DEFAULT '{}';
-- Connected sources of the team's live users, kept with every link written or removed.
ALTER TABLE teams ADD COLUMN connected_sources bigint NOT NULL DEFAULT 0;

-- Connected sources of the team's live users by the week (Monday, UTC) they were connected.
CREATE TABLE team_source_weeks (
  team_id     uuid NOT NULL,
  week        date NOT NULL,
  connections int NOT NULL,
  PRIMARY KEY (team_id, week)
);

CREATE FUNCTION source_week(connected timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT date_trunc('week', connected AT TIME ZONE 'UTC')::date $$;

CREATE FUNCTION list_bucket_size() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 256 $$;

-- Live users in buckets 1..i.
CREATE FUNCTION list_prefix(tree int[], i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  total int := 0;
BEGIN
  WHILE i > 0 LOOP
    total := total + tree[i];
    i := i & (i - 1);
  END LOOP;
  RETURN total;
END $$;

-- The tree with `delta` live users more at `user_position`; grown first when the position lies past its last bucket.
CREATE FUNCTION list_add(tree int[], user_position bigint, delta int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  bucket int := ((user_position - 1) / list_bucket_size() + 1)::int;
  n int := coalesce(array_length(tree, 1), 0);
  i int;
BEGIN
  WHILE n < bucket LOOP
    n := n + 1;
    -- A new entry holds the buckets (n - lowbit(n), n - 1] already counted, and bucket n (empty).
    tree := tree || (list_prefix(tree, n - 1) - list_prefix(tree, n - (n & -n)));
  END LOOP;
  i := bucket;
  WHILE i <= n LOOP
    tree[i] := tree[i] + delta;
    i := i + (i & -i);
  END LOOP;
  RETURN tree;
END $$;

-- The tree of buckets whose live users are `leaves` (bucket i has leaves[i]).
CREATE FUNCTION list_build(leaves int[]) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  tree int[] := leaves;
  n int := coalesce(array_length(leaves, 1), 0);
  i int;
BEGIN
  FOR i IN 1..n LOOP
    IF i + (i & -i) <= n THEN
      tree[i + (i & -i)] := tree[i + (i & -i)] + tree[i];
    END IF;
  END LOOP;
  RETURN tree;
END $$;

-- The tree of a team as its users stand (after a renumbering or an import).
CREATE FUNCTION list_tree_of(team uuid) RETURNS int[]
LANGUAGE sql STABLE AS $$
  SELECT list_build(coalesce(array_agg(coalesce(c.n, 0) ORDER BY b.bucket), '{}'))
  FROM generate_series(1, (SELECT coalesce(max((position - 1) / list_bucket_size() + 1), 0)::int FROM users WHERE team_id = team)) AS b(bucket)
  LEFT JOIN (
    SELECT ((position - 1) / list_bucket_size() + 1)::int AS bucket, count(*)::int AS n
    FROM users WHERE team_id = team GROUP BY 1
  ) c USING (bucket)
$$;

-- The position of the team's live user at `skip` (0-based) in list order, or null past the end.
-- The tree gives the bucket and how many of its users to skip; a full bucket has no holes, so
-- the position is arithmetic; otherwise the index is read from the bucket's start (at most 255 entries).
CREATE FUNCTION list_start(team uuid, tree int[], skip bigint) RETURNS bigint
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
  n int := coalesce(array_length(tree, 1), 0);
  bucket_size int := list_bucket_size();
  pos int := 0;
  step int := 1;
  rest bigint := skip;
BEGIN
  WHILE step * 2 <= n LOOP
    step := step * 2;
  END LOOP;
  -- The largest pos with fewer than `skip + 1` live users in buckets 1..pos: the user is in bucket pos + 1.
  WHILE step > 0 AND n > 0 LOOP
    IF pos + step <= n AND tree[pos + step] <= rest THEN
      pos := pos + step;
      rest := rest - tree[pos];
    END IF;
    step := step / 2;
  END LOOP;
  IF pos >= n THEN
    RETURN NULL;
  END IF;
  IF list_prefix(tree, pos + 1) - list_prefix(tree, pos) = bucket_size THEN
    RETURN pos::bigint * bucket_size + 1 + rest;
  END IF;
  RETURN (SELECT u.position FROM users u WHERE u.team_id = team AND u.position > pos::bigint * bucket_size
          ORDER BY u.position OFFSET rest LIMIT 1);
END $$;

-- Existing teams: positions are dense so far.
UPDATE teams t SET
  next_position = coalesce((SELECT max(position) FROM users u WHERE u.team_id = t.team_id), 0) + 1,
  list_tree = list_tree_of(t.team_id),
  connected_sources = (SELECT count(*) FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = t.team_id);
INSERT INTO team_source_weeks (team_id, week, connections)
SELECT u.team_id, source_week(us.created_on), count(*)
FROM user_sources us JOIN users u USING (user_id)
GROUP BY 1, 2;

-- The tree of a team whose users hold positions 1..n without holes (a bulk import).
CREATE FUNCTION list_tree_dense(n bigint) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT list_build(array_fill(list_bucket_size(), ARRAY[(n / list_bucket_size())::int])
                    || CASE WHEN n % list_bucket_size() > 0 THEN ARRAY[(n % list_bucket_size())::int] ELSE '{}'::int[] END)
$$;

-- Rewrites the positions of a team's users, live and scheduled for deletion, to their rank in
-- list order: for the rare user that arrives sorting before others (a clock that went back, an
-- import of older users). Only rows that move are written; the tree and next position follow.
CREATE FUNCTION renumber_team(team uuid) RETURNS void
LANGUAGE sql AS $$
  WITH ranked AS (
    SELECT user_id, row_number() OVER (ORDER BY created_on, user_id) AS rank
    FROM (SELECT user_id, created_on FROM users WHERE team_id = team
          UNION ALL
          SELECT user_id, created_on FROM deleted_users WHERE team_id = team) a
  ), live AS (
    UPDATE users u SET position = r.rank FROM ranked r
    WHERE u.user_id = r.user_id AND u.team_id = team AND u.position <> r.rank
  ), scheduled AS (
    UPDATE deleted_users d SET position = r.rank FROM ranked r
    WHERE d.user_id = r.user_id AND d.team_id = team AND d.position <> r.rank
  )
  UPDATE teams SET next_position = (SELECT count(*) FROM ranked) + 1 WHERE team_id = team;
  UPDATE teams SET list_tree = list_tree_of(team) WHERE team_id = team;
$$;

-- A stored document with its connected sources removed (as a deleted user is restored). The
-- document is JSON text written by src/user-document/document.ts or user_documents(): a quote
-- inside a string is always escaped, so the first `"connected_sources":[` and the first
-- `],"fallback_time_zone":` are the document's own keys.
CREATE FUNCTION doc_without_sources(doc text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT left(doc, strpos(doc, '"connected_sources":[') + 20) || substr(doc, strpos(doc, '],"fallback_time_zone":'))
$$;

-- The tree with one more live user at each of `count` positions from `first` on (users appended by an import).
CREATE FUNCTION list_add_range(tree int[], first bigint, count int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  at bigint := first;
  last bigint := first + count - 1;
  upto bigint;
BEGIN
  WHILE at <= last LOOP
    -- The rest of at's bucket, or of the range.
    upto := least(last, ((at - 1) / list_bucket_size() + 1) * list_bucket_size());
    tree := list_add(tree, at, (upto - at + 1)::int);
    at := upto + 1;
  END LOOP;
  RETURN tree;
END $$;

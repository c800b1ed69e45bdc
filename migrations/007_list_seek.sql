-- A page of a team with holes in its positions (users deleted) started at
-- list_start() (migrations/005): a PL/pgSQL function that walked the team's
-- tree and then ran a query of its own to skip into the bucket. The walk is
-- cheap; the query inside the function (SPI: its own plan lookup and
-- snapshot per call) was not: a random page
-- of a team with a tenth of its users deleted cost PostgreSQL 1.4 times one
-- of a team without holes (figures in CHANGELOG.md, issue 17).
--
-- list_seek() only walks the tree: it gives the first position of the
-- bucket the user at `skip` lies in, and how many of the bucket's live users
-- come before it. The page statement (src/users/queries.ts) skips them in
-- the index itself, as part of its own plan.

-- {the position before the user's bucket, live users of the bucket before it}, or null past the team's end.
CREATE FUNCTION list_seek(tree int[], skip bigint) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  n int := coalesce(array_length(tree, 1), 0);
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
  RETURN ARRAY[pos::bigint * list_bucket_size(), rest];
END $$;

DROP FUNCTION list_start(uuid, int[], bigint);

-- 014's list_starts_shifted and list_starts_extended in PL/pgSQL, same
-- results. As SQL functions with an aggregate or a subquery they cannot be
-- inlined, so PostgreSQL planned their body again in every statement that
-- called them: about 0.1 ms a call, and a delete or an undo makes five to
-- seven calls while it holds its team's rows. PL/pgSQL keeps its plans for
-- the session and changes the elements of the array in place
-- (docs/decisions/page-statement.md).

-- `starts` with every element after the `unit`-th moved by `by`.
CREATE OR REPLACE FUNCTION list_starts_shifted(starts bigint[], unit int, by int) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
  FOR k IN greatest(unit, 0) + 1 .. cardinality(starts) LOOP
    starts[k] := starts[k] + by;
  END LOOP;
  RETURN starts;
END $$;

-- `starts` (of units of `unit_size` positions, never empty) grown to `units`
-- elements: no hole between its last unit and the new ones.
CREATE OR REPLACE FUNCTION list_starts_extended(starts bigint[], units int, unit_size bigint) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  n constant int := cardinality(starts);
  last constant bigint := starts[n];
BEGIN
  FOR k IN n + 1 .. units LOOP
    starts[k] := last + (k - n) * unit_size;
  END LOOP;
  RETURN starts;
END $$;

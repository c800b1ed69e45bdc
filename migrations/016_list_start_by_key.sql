-- list_page_start reads one row of each of its three tables by primary key.
-- Those tables are a few pages each, and for so few pages PostgreSQL's cost
-- model prefers reading every page to an index lookup: its kept plans read
-- all of list_hole_teams and list_hole_blocks on every call. By key the call
-- costs about 10 µs instead of 16 (docs/decisions/page-statement.md). The
-- setting holds only while the function runs.
ALTER FUNCTION list_page_start(uuid, bigint, bigint) SET enable_seqscan = off;

-- A version of the team's holes alone, raised by every statement that opens,
-- fills or rewrites them (a delete, an undo, a renumbering, a bulk load:
-- src/writes/team-state.ts). The service keeps a copy of a team's holes
-- tagged with it and gives the page statement a start worked out from the
-- copy; the statement uses it only while this column still equals the tag,
-- and calls list_page_start otherwise (src/users/README.md). Unlike
-- `version`, creates, patches and connections leave it alone, so a copy
-- outlives them.
ALTER TABLE teams ADD COLUMN holes_version bigint NOT NULL DEFAULT 0;

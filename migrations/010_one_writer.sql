-- Every write to a team's users now keeps the team's derived state through
-- src/writes/team-state.ts, and the stored document has one builder,
-- src/user-document/document.ts (from what is stored: src/writes/stored-documents.ts).
-- The SQL that did either elsewhere goes:
--
-- - user_documents(), the second definition of the document (004): a renamed
--   source's users are rebuilt by the one builder, and `hds check` compares
--   every stored document with it;
-- - renumber_team() (005), which wrote the team's row itself, and
--   list_holes_rebuild() (008): team-state.ts renumbers, then recounts;
-- - list_holes_miscounted() (008), which only `hds check` called: it compares
--   list_holes with list_holes_of() itself.
DROP FUNCTION user_documents();
DROP FUNCTION renumber_team(uuid);
DROP FUNCTION list_holes_rebuild(uuid);
DROP FUNCTION list_holes_miscounted(uuid);

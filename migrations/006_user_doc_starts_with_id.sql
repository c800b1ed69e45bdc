-- Every stored user document starts with its own user id, as the builder
-- writes it (src/user-document/document.ts): {"user_id":"<the row's user_id>".
-- A list page reads each returned user's id for its audit line from there
-- (src/users/page-body.ts) instead of a column of its own in every row, and
-- writes it into the log line unescaped: a uuid as PostgreSQL writes it.
ALTER TABLE users ADD CONSTRAINT users_doc_starts_with_id
  CHECK (left(doc, 49) = '{"user_id":"' || user_id::text || '"');

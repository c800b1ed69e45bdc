-- Each user's API document stored as JSON text, written with the row by
-- src/users/document.ts, so that a read sends stored bytes. Building it per
-- read from the user_documents view cost PostgreSQL 2.5x the CPU of the
-- lookup itself (pgbench, one user by id), and a page of 100 users about
-- 2 ms. The view stays as the reference definition: the import uses it to
-- rebuild documents when a source's name or logo changes, and
-- test/documents.test.ts checks that stored and computed documents agree.
ALTER TABLE users ADD COLUMN doc text;
UPDATE users u SET doc = v.doc FROM user_documents v WHERE v.user_id = u.user_id;
ALTER TABLE users ALTER COLUMN doc SET NOT NULL;

-- Databases created before the bulk tables lost their foreign keys (see 001).
ALTER TABLE users DROP CONSTRAINT IF EXISTS users_team_id_fkey;
ALTER TABLE user_sources DROP CONSTRAINT IF EXISTS user_sources_user_id_fkey;
ALTER TABLE user_sources DROP CONSTRAINT IF EXISTS user_sources_source_id_fkey;

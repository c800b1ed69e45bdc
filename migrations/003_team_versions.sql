-- A team's version: raised by every transaction that changes any of the
-- team's users (their rows, documents, positions or count). A list page
-- kept in memory (src/users/page-cache.ts) is served again only while its
-- team's version is the one it was read at, checked in PostgreSQL on every
-- request. Whatever writes to users must raise it in the same transaction:
-- createUser and the import do (src/users/queries.ts, src/users/import.ts).
ALTER TABLE teams ADD COLUMN version bigint NOT NULL DEFAULT 0;

import type { Queryable } from '../db/client.js';

/**
 * The columns of a stored user but `position` and `doc`: the same in
 * `users` and `deleted_users` (migrations/001, 005). Every statement that
 * copies or writes a whole user names them from here, so that a column added
 * by a migration is added in one place.
 */
export const USER_FIELDS = [
  'user_id', 'team_id', 'client_user_id', 'created_on',
  'fallback_time_zone', 'fallback_time_zone_source', 'fallback_time_zone_updated_at',
  'fallback_birth_date', 'fallback_birth_date_source', 'fallback_birth_date_updated_at',
  'ingestion_start', 'ingestion_end',
] as const;

/** The columns the import spools per user, in its records' field order: every column but `position`. */
export const USER_COLUMNS = [...USER_FIELDS, 'doc'] as const;

/**
 * `column, …` (or `alias.column, …`) as a fragment of a statement. Not
 * `sql(columns)`: postgres.js reads an array after `INSERT INTO t (` as rows
 * to insert. The names are the constants above, never input.
 */
export const columnList = (sql: Queryable, columns: readonly string[], alias?: string) =>
  sql.unsafe(columns.map((c) => (alias ? `${alias}.${c}` : c)).join(', '));

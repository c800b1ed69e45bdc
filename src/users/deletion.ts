import type { Sql } from '../db/client.js';
import { isUniqueViolation } from '../db/errors.js';
import { retryingDeadlocks } from './retry.js';

/**
 * Deletion in two steps. DELETE moves the user out of `users` into
 * `deleted_users` at once (out of the list and the total, its
 * client_user_id free, its connections removed); undo_delete moves it back
 * within the grace period; the purge deletes it for good after it
 * (migrations/005). Each step is one statement: the team row is updated in
 * it (counts, version, the tree of live users) beside the bucket's holes
 * (migrations/008), which serialises the team's writes only for as long as
 * the statement and its commit take.
 */

/**
 * Schedules the team's user for deletion; false when the team has no such
 * live user. The team's counts, version and tree follow, its position joins
 * its bucket's holes (migrations/008), and the week counts of the
 * connections removed follow.
 */
export async function deleteUser(sql: Sql, teamId: string, userId: string, keyId: string): Promise<boolean> {
  const rows = await retryingDeadlocks(() => sql`
    WITH moved AS (
      DELETE FROM users WHERE team_id = ${teamId} AND user_id = ${userId}
      RETURNING *
    ), kept AS (
      INSERT INTO deleted_users (
        user_id, team_id, client_user_id, created_on, position,
        fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
        fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
        ingestion_start, ingestion_end, doc, deleted_at, deleted_by_key)
      SELECT user_id, team_id, client_user_id, created_on, position,
        fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
        fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
        ingestion_start, ingestion_end, doc_without_sources(doc), now(), ${keyId}
      FROM moved
    ), links AS (
      DELETE FROM user_sources us USING moved m WHERE us.user_id = m.user_id RETURNING us.created_on
    ), weeks AS (
      UPDATE team_source_weeks w SET connections = w.connections - c.n
      FROM (SELECT source_week(created_on) AS week, count(*)::int AS n FROM links GROUP BY 1) c
      WHERE w.team_id = ${teamId} AND w.week = c.week
    ), counted AS (
      UPDATE teams t SET user_count = t.user_count - 1, version = t.version + 1,
        list_tree = list_add(t.list_tree, m.position, -1),
        connected_sources = t.connected_sources - (SELECT count(*) FROM links)
      FROM moved m WHERE t.team_id = m.team_id
    ), holed AS (
      INSERT INTO list_holes AS h (team_id, bucket, holes)
      SELECT team_id, list_bucket_of(position), ARRAY[list_offset_of(position)] FROM moved
      ON CONFLICT (team_id, bucket) DO UPDATE SET holes = (SELECT array_agg(o ORDER BY o) FROM unnest(h.holes || excluded.holes) AS o)
    )
    SELECT user_id FROM moved`);
  return rows.length === 1;
}

export type UndoTarget = { user_id: string } | { client_user_id: string };
export type UndoResult = { restored: string } | 'none' | 'conflict';

/**
 * Restores the team's user scheduled for deletion under `target` (by
 * client_user_id: the one deleted last) as it was: same id, created_on,
 * values and position, without its connections; answers the restored
 * user's id (for the audit line: the client_user_id is the team's data, not
 * ours to log). 'conflict': a live user of the team holds its client_user_id
 * now (the unique index decides).
 */
export async function undoDelete(sql: Sql, teamId: string, target: UndoTarget): Promise<UndoResult> {
  const userId = 'user_id' in target ? target.user_id : null;
  const clientUserId = 'client_user_id' in target ? target.client_user_id : null;
  try {
    const rows = await retryingDeadlocks(() => sql<{ user_id: string }[]>`
      WITH target AS (
        SELECT user_id FROM deleted_users
        WHERE team_id = ${teamId} AND (user_id = ${userId}::uuid OR client_user_id = ${clientUserId})
        ORDER BY deleted_at DESC LIMIT 1
      ), restored AS (
        DELETE FROM deleted_users d USING target WHERE d.user_id = target.user_id
        RETURNING d.*
      ), back AS (
        INSERT INTO users (
          user_id, team_id, client_user_id, created_on, position,
          fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
          fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
          ingestion_start, ingestion_end, doc)
        SELECT user_id, team_id, client_user_id, created_on, position,
          fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
          fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
          ingestion_start, ingestion_end, doc
        FROM restored
        RETURNING user_id, team_id, position
      ), counted AS (
        UPDATE teams t SET user_count = t.user_count + 1, version = t.version + 1,
          list_tree = list_add(t.list_tree, b.position, 1)
        FROM back b WHERE t.team_id = b.team_id
      ), filled AS (
        UPDATE list_holes h SET holes = array_remove(h.holes, list_offset_of(b.position))
        FROM back b WHERE h.team_id = b.team_id AND h.bucket = list_bucket_of(b.position)
      )
      SELECT user_id FROM back`);
    return rows.length === 1 ? { restored: rows[0]!.user_id } : 'none';
  } catch (err) {
    if (isUniqueViolation(err)) return 'conflict';
    throw err;
  }
}

export interface PurgedUser {
  team_id: string;
  user_id: string;
  /** The key that asked for the deletion (its id). */
  deleted_by_key: string | null;
}

// pg_try_advisory_xact_lock key: one purge at a time across instances and workers.
const PURGE_LOCK = 0x4844_5350; // "HDSP"
const PURGE_BATCH = 500;

/**
 * Purges the users whose deletion is older than the grace period: their row
 * in `deleted_users`, the last one that holds them (their connections went
 * at deletion). In batches, each its own short transaction, so that no lock
 * is held for long; a batch runs only while no other instance purges. Every
 * purged user is handed to `onPurged` (for the log). Returns how many.
 */
export async function purgeDeletedUsers(sql: Sql, graceMs: number, onPurged: (users: PurgedUser[]) => void = () => {}): Promise<number> {
  let purged = 0;
  for (;;) {
    const batch = await sql<PurgedUser[]>`
      WITH purger AS (SELECT pg_try_advisory_xact_lock(${PURGE_LOCK}) AS alone)
      DELETE FROM deleted_users
      WHERE (SELECT alone FROM purger) AND user_id IN (
        SELECT user_id FROM deleted_users
        WHERE deleted_at <= now() - ${graceMs} * interval '1 millisecond'
        ORDER BY deleted_at LIMIT ${PURGE_BATCH}
        FOR UPDATE SKIP LOCKED)
      RETURNING team_id, user_id, deleted_by_key`;
    if (batch.length > 0) onPurged([...batch]);
    purged += batch.length;
    if (batch.length < PURGE_BATCH) return purged;
  }
}

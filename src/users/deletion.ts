import type { Sql } from '../db/client.js';
import { isUniqueViolation } from '../db/errors.js';
import { retryingDeadlocks } from './retry.js';
import { teamChange } from '../writes/team-state.js';
import { teamWrite } from '../writes/team-batches.js';
import { columnList, USER_FIELDS } from '../writes/user-columns.js';

/**
 * Deletion in two steps. DELETE moves the user out of `users` into
 * `deleted_users` at once (out of the list and the total, its
 * client_user_id free, its connections removed); undo_delete moves it back
 * within the grace period; the purge deletes it for good after it
 * (migrations/005). Delete and undo are one statement each, which ends with
 * the team's state (team-state.ts), and goes out with the team's other
 * writes that arrive meanwhile (src/writes/team-batches.ts). The purge
 * changes no team state.
 */

/**
 * Schedules the team's user for deletion; false when the team has no such
 * live user. Its connections go with it; the team's state follows. Events:
 * `provider.connection.deleted` for each connection removed, then
 * `user.deleted`, whose `purge_after` is when the grace period (`graceMs`)
 * ends.
 */
export async function deleteUser(sql: Sql, teamId: string, userId: string, keyId: string, graceMs: number): Promise<boolean> {
  const rows = await retryingDeadlocks(() => teamWrite(sql, teamId, (q) => q`
    WITH moved AS (
      DELETE FROM users WHERE team_id = ${teamId} AND user_id = ${userId}
      RETURNING *
    ), kept AS (
      INSERT INTO deleted_users (${columnList(q, USER_FIELDS)}, position, doc, deleted_at, deleted_by_key)
      SELECT ${columnList(q, USER_FIELDS)}, position, doc_without_sources(doc), now(), ${keyId} FROM moved
    ), links AS (
      DELETE FROM user_sources us USING moved m WHERE us.user_id = m.user_id RETURNING us.created_on, us.source_id
    ), moved_events AS (
      SELECT 'provider.connection.deleted' AS event_type, m.user_id, m.client_user_id,
        '{"user_id":"' || m.user_id || '","provider":' || s.json || ',"source":' || s.json || '}' AS data
      FROM moved m CROSS JOIN (
        SELECT l.created_on, c.slug, '{"name":' || to_json(c.name)::text || ',"slug":' || to_json(c.slug)::text || ',"logo":' || to_json(c.logo)::text || '}' AS json
        FROM links l JOIN sources c USING (source_id)
        ORDER BY l.created_on, c.slug COLLATE "C") s
      UNION ALL
      SELECT 'user.deleted', m.user_id, m.client_user_id,
        '{"user_id":"' || m.user_id || '","client_user_id":' || to_json(m.client_user_id::text)::text
          || ',"purge_after":' || to_json(now() + ${graceMs} * interval '1 millisecond')::text || '}'
      FROM moved m
    ), ${teamChange(q, teamId, { left: 'moved', unlinked: 'links', events: 'moved_events' })}
    SELECT user_id FROM moved`));
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
    const rows = await retryingDeadlocks(() => teamWrite(sql, teamId, (q) => q<{ user_id: string }[]>`
      WITH target AS (
        SELECT user_id FROM deleted_users
        WHERE team_id = ${teamId} AND (user_id = ${userId}::uuid OR client_user_id = ${clientUserId})
        ORDER BY deleted_at DESC LIMIT 1
      ), restored AS (
        DELETE FROM deleted_users d USING target WHERE d.user_id = target.user_id
        RETURNING d.*
      ), back AS (
        INSERT INTO users (${columnList(q, USER_FIELDS)}, position, doc)
        SELECT ${columnList(q, USER_FIELDS)}, position, doc FROM restored
        RETURNING user_id, position, client_user_id, doc
      ), back_events AS (
        SELECT 'user.restored' AS event_type, user_id, client_user_id, doc AS data FROM back
      ), ${teamChange(q, teamId, { returned: 'back', events: 'back_events' })}
      SELECT user_id FROM back`));
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
 * in `deleted_users`, and every event about them with its messages and
 * their attempts (contract section 10: erasure; their connections went at
 * deletion). In batches, each one statement and its own short transaction,
 * so that no lock is held for long; a batch runs only while no other
 * instance purges. Every purged user is handed to `onPurged` (for the log).
 * Returns how many.
 */
export async function purgeDeletedUsers(sql: Sql, graceMs: number, onPurged: (users: PurgedUser[]) => void = () => {}): Promise<number> {
  let purged = 0;
  for (;;) {
    const batch = await sql<PurgedUser[]>`
      WITH purger AS (SELECT pg_try_advisory_xact_lock(${PURGE_LOCK}) AS alone
      ), purged AS (
        DELETE FROM deleted_users
        WHERE (SELECT alone FROM purger) AND user_id IN (
          SELECT user_id FROM deleted_users
          WHERE deleted_at <= now() - ${graceMs} * interval '1 millisecond'
          ORDER BY deleted_at LIMIT ${PURGE_BATCH}
          FOR UPDATE SKIP LOCKED)
        RETURNING team_id, user_id, deleted_by_key
      ), events_gone AS (
        -- Their messages go with them (ON DELETE CASCADE).
        DELETE FROM events WHERE user_id IN (SELECT user_id FROM purged)
      )
      SELECT * FROM purged`;
    if (batch.length > 0) onPurged([...batch]);
    purged += batch.length;
    if (batch.length < PURGE_BATCH) return purged;
  }
}

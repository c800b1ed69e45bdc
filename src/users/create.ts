import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../db/client.js';
import { userDocument } from '../user-document/document.js';
import { retryingDeadlocks } from './retry.js';

export interface NewUser {
  client_user_id: string;
  fallback_time_zone?: string;
  fallback_birth_date?: string;
  ingestion_start?: string;
  ingestion_end?: string;
}

export type CreateResult =
  | { created: true; user_id: string; doc: string }
  | { created: false; existing: { user_id: string; created_on: string } };

/**
 * Stands for the creation time in the document built here: PostgreSQL puts
 * its clock's time in its place (the time is read once the team is locked,
 * so that times follow positions). A raw control character never appears in
 * a document otherwise: free text is JSON-escaped, and the other values are
 * ids, dates and zone names.
 */
const NOW = '\u0001';

/** The statement's outcome: the new user's document, or nothing written (`inOrder` false: it would not sort last). */
type Attempt = { doc: string | null; in_order: boolean };

/**
 * Creates a user. The team row is locked for the statement, so creates in
 * one team take positions one after the other; a client_user_id taken by a
 * live user of the team writes nothing (the unique index decides, also
 * between concurrent creates). One statement in the usual case: the user
 * sorts last (its time is the latest), takes the team's next position, and
 * the team's counters and tree (migrations/005) move with it.
 */
export async function createUser(sql: Sql, teamId: string, input: NewUser): Promise<CreateResult> {
  const userId = randomUUID();
  const template = documentTemplate(userId, teamId, input);
  for (let attempt = 1; ; attempt++) {
    const [tried] = await retryingDeadlocks(() => insertUser(sql, userId, teamId, input, template, false));
    // No row at all: the team is gone (deleted after the key was checked); trying again cannot help.
    if (!tried) throw new Error(`team ${teamId} does not exist`);
    if (tried.doc) return { created: true, user_id: userId, doc: tried.doc };
    if (!tried.in_order) {
      // Only when the clock went back, or an import brought users from the future: inserted, then the team renumbered.
      const doc = await retryingDeadlocks(() => sql.begin(async (tx) => {
        const [forced] = await insertUser(tx, userId, teamId, input, template, true);
        if (forced?.doc) {
          await tx`SELECT renumber_team(${teamId})`;
          await tx`SELECT list_holes_rebuild(${teamId})`;
        }
        return forced?.doc;
      }));
      if (doc) return { created: true, user_id: userId, doc };
    }
    const [existing] = await sql<{ user_id: string; created_on: string }[]>`
      SELECT user_id, to_json(created_on) #>> '{}' AS created_on
      FROM users WHERE team_id = ${teamId} AND client_user_id = ${input.client_user_id}`;
    if (existing) return { created: false, existing };
    // The holder of the client_user_id was deleted (or renamed) between the insert and this read: try again.
    if (attempt >= 5) throw new Error(`create in team ${teamId} wrote nothing, and no user holds its client_user_id`);
  }
}

function documentTemplate(userId: string, teamId: string, input: NewUser): string {
  return userDocument({
    user_id: userId, team_id: teamId, client_user_id: input.client_user_id, created_on: NOW, connected_sources: [],
    fallback_time_zone: input.fallback_time_zone ? { id: input.fallback_time_zone, source_slug: 'manual', updated_at: NOW } : null,
    fallback_birth_date: input.fallback_birth_date ? { value: input.fallback_birth_date, source_slug: 'manual', updated_at: NOW } : null,
    ingestion_start: input.ingestion_start ?? null, ingestion_end: input.ingestion_end ?? null,
  });
}

/**
 * The insert, with the team locked. Unless `anyOrder`, nothing is written
 * when the new user would not sort after the team's last user (live or
 * scheduled for deletion): its position would then be out of order.
 */
function insertUser(sql: Queryable, userId: string, teamId: string, input: NewUser, template: string, anyOrder: boolean) {
  const tz = input.fallback_time_zone ?? null;
  const bd = input.fallback_birth_date ?? null;
  return sql<Attempt[]>`
    WITH team AS (
      SELECT team_id, next_position FROM teams WHERE team_id = ${teamId} FOR UPDATE
    ), now AS (
      -- LATERAL on the locked row: the clock is read after the lock is held.
      SELECT t.team_id, t.next_position, c.at FROM team t CROSS JOIN LATERAL (SELECT clock_timestamp() AS at, t.team_id AS locked) c
    ), placed AS (
      SELECT n.*, ${anyOrder}::boolean OR NOT EXISTS (
        SELECT 1 FROM (
          (SELECT created_on, user_id FROM users WHERE team_id = n.team_id ORDER BY position DESC LIMIT 1)
          UNION ALL
          (SELECT created_on, user_id FROM deleted_users WHERE team_id = n.team_id ORDER BY position DESC LIMIT 1)
        ) l WHERE (l.created_on, l.user_id) > (n.at, ${userId}::uuid)
      ) AS in_order
      FROM now n
    ), created AS (
      INSERT INTO users (
        user_id, team_id, client_user_id, created_on, position,
        fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
        fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
        ingestion_start, ingestion_end, doc)
      SELECT ${userId}, p.team_id, ${input.client_user_id}, p.at, p.next_position,
        ${tz}, CASE WHEN ${tz}::text IS NULL THEN NULL ELSE 'manual' END, CASE WHEN ${tz}::text IS NULL THEN NULL ELSE p.at END,
        ${bd}, CASE WHEN ${bd}::text IS NULL THEN NULL ELSE 'manual' END, CASE WHEN ${bd}::text IS NULL THEN NULL ELSE p.at END,
        ${input.ingestion_start ?? null}, ${input.ingestion_end ?? null},
        replace(${template}, chr(1), to_json(p.at) #>> '{}')
      FROM placed p WHERE p.in_order
      ON CONFLICT (team_id, client_user_id) DO NOTHING
      RETURNING position, doc
    ), counted AS (
      UPDATE teams t SET user_count = t.user_count + 1, version = t.version + 1,
        next_position = c.position + 1, list_tree = list_add(t.list_tree, c.position, 1)
      FROM created c WHERE t.team_id = ${teamId}
    )
    SELECT (SELECT doc FROM created) AS doc, p.in_order FROM placed p`;
}

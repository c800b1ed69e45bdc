import type { PendingQuery, Row } from 'postgres';
import type { Queryable, Tx } from '../db/client.js';
import { userDocument, type SourceRef } from '../user-document/document.js';
import { lockTeams, usersChanged } from './team-state.js';

/**
 * A stored user's document from its columns and connections, with the one
 * builder (src/user-document/document.ts). Writers build the document from
 * what they write; this builds it again from what is stored: for the users
 * of a source whose name or logo changed, and for `hds check`, which
 * compares every stored document with it.
 */

interface StoredUser {
  user_id: string;
  team_id: string;
  client_user_id: string;
  created_on: string;
  fallback_time_zone: string | null;
  fallback_time_zone_source: string | null;
  fallback_time_zone_updated_at: string | null;
  fallback_birth_date: string | null;
  fallback_birth_date_source: string | null;
  fallback_birth_date_updated_at: string | null;
  ingestion_start: string | null;
  ingestion_end: string | null;
  sources: { created_on: string; source: SourceRef }[];
  doc: string;
}

const ROWS_PER_BATCH = 2000;

/**
 * The users `where` selects (a condition on `u`, the users table), with
 * what their documents are built from. Date-times as PostgreSQL writes them
 * in JSON (the service's sessions are in UTC); connections in the
 * document's order: connection time, then slug byte by byte.
 */
function storedUsers(sql: Queryable, where: PendingQuery<Row[]>, tail: PendingQuery<Row[]> = sql``) {
  return sql<StoredUser[]>`
    SELECT u.user_id, u.team_id, u.client_user_id, to_json(u.created_on) #>> '{}' AS created_on,
      u.fallback_time_zone, u.fallback_time_zone_source, to_json(u.fallback_time_zone_updated_at) #>> '{}' AS fallback_time_zone_updated_at,
      to_json(u.fallback_birth_date) #>> '{}' AS fallback_birth_date, u.fallback_birth_date_source, to_json(u.fallback_birth_date_updated_at) #>> '{}' AS fallback_birth_date_updated_at,
      to_json(u.ingestion_start) #>> '{}' AS ingestion_start, to_json(u.ingestion_end) #>> '{}' AS ingestion_end,
      coalesce((
        SELECT json_agg(json_build_object('created_on', us.created_on, 'source', json_build_object('name', s.name, 'slug', s.slug, 'logo', s.logo))
                        ORDER BY us.created_on, s.slug COLLATE "C")
        FROM user_sources us JOIN sources s USING (source_id) WHERE us.user_id = u.user_id), '[]') AS sources,
      u.doc
    FROM users u WHERE ${where} ${tail}`;
}

/** The document the user's stored columns and connections make. */
function documentOf(u: StoredUser): string {
  return userDocument({
    user_id: u.user_id, team_id: u.team_id, client_user_id: u.client_user_id, created_on: u.created_on,
    connected_sources: u.sources,
    fallback_time_zone: u.fallback_time_zone === null ? null
      : { id: u.fallback_time_zone, source_slug: u.fallback_time_zone_source!, updated_at: u.fallback_time_zone_updated_at! },
    fallback_birth_date: u.fallback_birth_date === null ? null
      : { value: u.fallback_birth_date, source_slug: u.fallback_birth_date_source!, updated_at: u.fallback_birth_date_updated_at! },
    ingestion_start: u.ingestion_start, ingestion_end: u.ingestion_end,
  });
}

/**
 * Builds again the documents of the users connected to these sources (their
 * name or logo changed), in batches; the teams whose users changed get new
 * versions. They may be any team's users: the teams are locked first, in id
 * order, as every writer locks its team before it touches a user row.
 */
export async function rebuildDocumentsOfSources(tx: Tx, sourceIds: number[]): Promise<void> {
  if (sourceIds.length === 0) return;
  const linked = tx`u.user_id IN (SELECT user_id FROM user_sources WHERE source_id = ANY(${sourceIds}::int[]))`;
  const teams = await lockTeams(tx, (await tx<{ team_id: string }[]>`SELECT DISTINCT u.team_id FROM users u WHERE ${linked}`).map((t) => t.team_id));
  const changedTeams = new Set<string>();
  for await (const batch of storedUsers(tx, linked).cursor(ROWS_PER_BATCH)) {
    const changed = batch.map((u) => ({ u, doc: documentOf(u) })).filter(({ u, doc }) => doc !== u.doc);
    if (changed.length === 0) continue;
    await tx`
      UPDATE users u SET doc = c.doc
      FROM unnest(${changed.map((c) => c.u.user_id)}::uuid[], ${changed.map((c) => c.doc)}::text[]) AS c(user_id, doc)
      WHERE u.user_id = c.user_id`;
    for (const c of changed) changedTeams.add(c.u.team_id);
  }
  await usersChanged(tx, teams.filter((id) => changedTeams.has(id)));
}

/**
 * Users (of the teams given, or of every team) whose stored document is not
 * the one their columns and connections make: the ids, per team, at most
 * `limit` of them in all. In batches by user_id, each a short statement of
 * its own: one long read would hold its lock on users for as long as the
 * whole check takes, and a bulk import's swap waits for every such lock.
 */
export async function documentDrifts(sql: Queryable, only: { teamIds?: string[]; userIds?: string[] }, limit = 1000): Promise<{ team_id: string; user_id: string }[]> {
  const where = only.userIds ? sql`u.user_id = ANY(${only.userIds}::uuid[])`
    : only.teamIds ? sql`u.team_id = ANY(${only.teamIds}::uuid[])` : sql`true`;
  const drifts: { team_id: string; user_id: string }[] = [];
  for (let after: string | null = null; drifts.length < limit;) {
    const batch: StoredUser[] = await storedUsers(sql, sql`${where} AND (${after}::uuid IS NULL OR u.user_id > ${after}::uuid)`,
      sql`ORDER BY u.user_id LIMIT ${ROWS_PER_BATCH}`);
    for (const u of batch) if (documentOf(u) !== u.doc) drifts.push({ team_id: u.team_id, user_id: u.user_id });
    if (batch.length < ROWS_PER_BATCH) break;
    after = batch[batch.length - 1]!.user_id;
  }
  return drifts;
}

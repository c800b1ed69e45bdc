import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../db/client.js';

export interface Team {
  team_id: string;
  name: string;
  created_at: Date;
  user_count: number;
}

/** A team as the Management API shows it; date-times as the API writes them (ISO 8601, `+00:00`). */
export interface TeamRecord {
  id: string;
  name: string;
  created_on: string;
  integration_team_id: string | null;
}

const TEAM_RECORD = (sql: Queryable) =>
  sql`team_id AS id, name, to_json(created_at) #>> '{}' AS created_on, integration_team_id`;

/**
 * The one way a team is created: the admin CLI (`hds teams create`), the
 * demo seed and the Management API (`POST /v1/org/{org_id}/team`).
 */
export async function insertTeam(sql: Sql, team: { name: string; integrationTeamId?: string | null }, teamId: string = randomUUID()): Promise<TeamRecord> {
  const [row] = await sql<TeamRecord[]>`
    INSERT INTO teams (team_id, name, integration_team_id) VALUES (${teamId}, ${team.name}, ${team.integrationTeamId ?? null})
    RETURNING ${TEAM_RECORD(sql)}`;
  return row!;
}

/** insertTeam() for callers that need the id only. */
export async function createTeam(sql: Sql, name: string, teamId: string = randomUUID()): Promise<string> {
  return (await insertTeam(sql, { name }, teamId)).id;
}

export async function findTeam(sql: Sql, teamId: string): Promise<TeamRecord | undefined> {
  const [row] = await sql<TeamRecord[]>`SELECT ${TEAM_RECORD(sql)} FROM teams WHERE team_id = ${teamId}`;
  return row;
}

/**
 * Teams in (created_at, team_id) order after `after`, at most `limit`, read
 * through the index teams_list in that order: a page deep in the list reads
 * what the first one does. `search`, when given, keeps the teams whose name
 * holds it (any case) or whose id is it; they are filtered on that same walk.
 */
export async function listTeamsPage(
  sql: Sql, after: { createdOn: string; id: string } | undefined, limit: number, search?: string,
): Promise<TeamRecord[]> {
  const pattern = search === undefined ? undefined : `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<TeamRecord[]>`
    SELECT ${TEAM_RECORD(sql)} FROM teams
    WHERE true
      -- The time is bound as text: the driver would make it a JS Date, which has no microseconds.
      ${after === undefined ? sql`` : sql`AND (created_at, team_id) > (${after.createdOn}::text::timestamptz, ${after.id}::uuid)`}
      ${pattern === undefined ? sql`` : sql`AND (name ILIKE ${pattern} OR team_id::text = lower(${search!}))`}
    ORDER BY created_at, team_id
    LIMIT ${limit}`;
}

/** Changes the fields given (undefined: left as is; null clears integration_team_id); undefined when there is no such team. */
export async function updateTeam(
  sql: Sql, teamId: string, change: { name?: string; integrationTeamId?: string | null },
): Promise<TeamRecord | undefined> {
  const [row] = await sql<TeamRecord[]>`
    UPDATE teams SET
      name = ${change.name === undefined ? sql`name` : sql`${change.name}`},
      integration_team_id = ${change.integrationTeamId === undefined ? sql`integration_team_id` : sql`${change.integrationTeamId}`}
    WHERE team_id = ${teamId}
    RETURNING ${TEAM_RECORD(sql)}`;
  return row;
}

/**
 * Deletes a team that has no users, live or scheduled for deletion, with
 * everything that is only the team's: its keys and webhook endpoints (by
 * their foreign keys, ON DELETE CASCADE) and its kept list state (holes left
 * by purged users, connection weeks). The team row is locked first: a
 * user created meanwhile waits on that lock (every writer of users takes
 * it) and then finds no team, so a team is never deleted under a new user.
 */
export async function deleteTeam(sql: Sql, teamId: string): Promise<'deleted' | 'missing' | 'has_users'> {
  return sql.begin(async (tx) => {
    const locked = await tx`SELECT 1 FROM teams WHERE team_id = ${teamId} FOR UPDATE`;
    if (locked.length === 0) return 'missing';
    // A statement of its own, after the lock: its snapshot sees the users of a create that held the lock before us.
    const [{ has_users } = { has_users: true }] = await tx<{ has_users: boolean }[]>`
      SELECT EXISTS (SELECT 1 FROM users WHERE team_id = ${teamId})
          OR EXISTS (SELECT 1 FROM deleted_users WHERE team_id = ${teamId}) AS has_users`;
    if (has_users) return 'has_users';
    await tx`DELETE FROM list_holes WHERE team_id = ${teamId}`;
    await tx`DELETE FROM list_hole_blocks WHERE team_id = ${teamId}`;
    await tx`DELETE FROM list_hole_teams WHERE team_id = ${teamId}`;
    await tx`DELETE FROM team_source_weeks WHERE team_id = ${teamId}`;
    await tx`DELETE FROM teams WHERE team_id = ${teamId}`;
    return 'deleted';
  });
}

export async function listTeams(sql: Sql): Promise<Team[]> {
  return sql<Team[]>`SELECT team_id, name, created_at, user_count::int AS user_count FROM teams ORDER BY created_at, team_id`;
}

export async function teamExists(sql: Sql, teamId: string): Promise<boolean> {
  const rows = await sql`SELECT 1 FROM teams WHERE team_id = ${teamId}`;
  return rows.length === 1;
}

/** Creates the teams of `teamIds` that do not exist yet (an import names teams by id); returns how many it created. */
export async function createMissingTeams(sql: Queryable, teamIds: string[], name: string): Promise<number> {
  const created = await sql`
    INSERT INTO teams (team_id, name)
    SELECT team_id, ${name} FROM unnest(${teamIds}::uuid[]) AS t(team_id)
    ON CONFLICT (team_id) DO NOTHING RETURNING team_id`;
  return created.length;
}

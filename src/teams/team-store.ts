import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../db/client.js';

export interface Team {
  team_id: string;
  name: string;
  created_at: Date;
  user_count: number;
}

export async function createTeam(sql: Sql, name: string, teamId: string = randomUUID()): Promise<string> {
  await sql`INSERT INTO teams (team_id, name) VALUES (${teamId}, ${name})`;
  return teamId;
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

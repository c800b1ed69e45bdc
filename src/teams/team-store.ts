import { randomUUID } from 'node:crypto';
import type { Sql } from '../db/client.js';

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

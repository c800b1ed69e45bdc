import type { Sql } from '../db/client.js';
import { batcherFor, type TurnBatcher } from '../db/turn-batcher.js';
import type { UserDoc } from './queries.js';

interface Lookup { teamId: string; userId: string }

/**
 * Each lookup matches on (team_id, user_id) in SQL: a batch mixing teams can
 * never hand one team another's user.
 */
async function findUserDocs(sql: Sql, lookups: Lookup[]): Promise<(UserDoc | undefined)[]> {
  const rows = await sql`
    SELECT u.team_id, u.user_id, u.doc
    FROM unnest(${lookups.map((l) => l.teamId)}::uuid[], ${lookups.map((l) => l.userId)}::uuid[]) AS k(team_id, user_id)
    JOIN users u ON u.user_id = k.user_id AND u.team_id = k.team_id`.raw() as Buffer[][];
  const found = new Map<string, UserDoc>();
  for (const [team, user, doc] of rows) found.set(`${team!.toString()}/${user!.toString()}`, { user_id: user!.toString(), doc: doc! });
  // Ids compare in PostgreSQL's lower-case form: the route accepts upper-case UUIDs too.
  return lookups.map((l) => found.get(`${l.teamId.toLowerCase()}/${l.userId.toLowerCase()}`));
}

const docBatchers = new WeakMap<Sql, TurnBatcher<Lookup, UserDoc | undefined>>();

/** The user `userId` of team `teamId`, looked up together with the other lookups of this turn on the same pool. */
export function findUserDocBatched(sql: Sql, teamId: string, userId: string): Promise<UserDoc | undefined> {
  return batcherFor(docBatchers, sql, findUserDocs).load({ teamId, userId });
}

async function findTeamVersions(sql: Sql, teamIds: string[]): Promise<(string | undefined)[]> {
  const rows = await sql`
    SELECT team_id, version FROM teams WHERE team_id = ANY(${[...new Set(teamIds)]}::uuid[])`.raw() as Buffer[][];
  const versions = new Map(rows.map(([team, version]) => [team!.toString(), version!.toString()]));
  // The team ids come from verified keys, in PostgreSQL's own lower-case form.
  return teamIds.map((id) => versions.get(id));
}

const versionBatchers = new WeakMap<Sql, TurnBatcher<string, string | undefined>>();

/** The team's version (teams.version, see migrations/003); undefined when the team does not exist. */
export function findTeamVersionBatched(sql: Sql, teamId: string): Promise<string | undefined> {
  return batcherFor(versionBatchers, sql, findTeamVersions).load(teamId);
}

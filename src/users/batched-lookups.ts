import type { Sql } from '../db/client.js';
import { batcherFor, type TurnBatcher } from '../db/turn-batcher.js';
import type { UserDoc } from './queries.js';

interface Lookup { teamId: string; userId: string }

/**
 * The users of a batch of lookups, as `u`. Each lookup matches on
 * (team_id, user_id) in SQL: a batch mixing teams can never hand one team
 * another's user.
 */
const lookedUp = (sql: Sql, lookups: Lookup[]) => sql`
  unnest(${lookups.map((l) => l.teamId)}::uuid[], ${lookups.map((l) => l.userId)}::uuid[]) AS k(team_id, user_id)
  JOIN users u ON u.user_id = k.user_id AND u.team_id = k.team_id`;

async function findUserDocs(sql: Sql, lookups: Lookup[]): Promise<(UserDoc | undefined)[]> {
  const rows = await sql`SELECT u.team_id, u.user_id, u.doc FROM ${lookedUp(sql, lookups)}`.raw() as Buffer[][];
  return inLookupOrder(lookups, rows, ([, user, doc]) => ({ user_id: user!.toString(), doc: doc! }));
}

/** The answer to each lookup from rows that start with team_id and user_id. */
function inLookupOrder<T>(lookups: Lookup[], rows: Buffer[][], answer: (row: Buffer[]) => T): (T | undefined)[] {
  const found = new Map<string, T>();
  for (const row of rows) found.set(`${row[0]!.toString()}/${row[1]!.toString()}`, answer(row));
  // Ids compare in PostgreSQL's lower-case form: the route accepts upper-case UUIDs too.
  return lookups.map((l) => found.get(`${l.teamId.toLowerCase()}/${l.userId.toLowerCase()}`));
}

const docBatchers = new WeakMap<Sql, TurnBatcher<Lookup, UserDoc | undefined>>();

/** The user `userId` of team `teamId`, looked up together with the other lookups of this turn on the same pool. */
export function findUserDocBatched(sql: Sql, teamId: string, userId: string): Promise<UserDoc | undefined> {
  return batcherFor(docBatchers, sql, findUserDocs).load({ teamId, userId });
}

/** A user's stored document and its row's version (xmin), for a write made only if the row is still that version. */
export interface VersionedDoc { doc: string; version: string }

async function findVersionedDocs(sql: Sql, lookups: Lookup[]): Promise<(VersionedDoc | undefined)[]> {
  const rows = await sql`SELECT u.team_id, u.user_id, u.doc, u.xmin::text FROM ${lookedUp(sql, lookups)}`.raw() as Buffer[][];
  return inLookupOrder(lookups, rows, ([, , doc, version]) => ({ doc: doc!.toString(), version: version!.toString() }));
}

const versionedDocBatchers = new WeakMap<Sql, TurnBatcher<Lookup, VersionedDoc | undefined>>();

/** The user `userId` of team `teamId` as a patch reads it, looked up with the other such lookups of this turn on the same pool. */
export function findVersionedDocBatched(sql: Sql, teamId: string, userId: string): Promise<VersionedDoc | undefined> {
  return batcherFor(versionedDocBatchers, sql, findVersionedDocs).load({ teamId, userId });
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

import type { Queryable, Sql } from '../db/client.js';
import { userDocument } from './document.js';

/**
 * A user's API document as the UTF-8 bytes PostgreSQL holds (users.doc).
 * Reads use the driver's raw mode: the bytes go from the database socket to
 * the HTTP socket without being decoded into a JS string and encoded again.
 */
export interface UserDoc {
  user_id: string;
  doc: Buffer;
}

type RawRow = Buffer[];

function userDoc(rows: RawRow[]): UserDoc | undefined {
  const [row] = rows;
  return row ? { user_id: row[0]!.toString(), doc: row[1]! } : undefined;
}

export async function findUserDocByClientUserId(sql: Sql, teamId: string, clientUserId: string): Promise<UserDoc | undefined> {
  return userDoc(await sql`
    SELECT user_id, doc FROM users WHERE team_id = ${teamId} AND client_user_id = ${clientUserId}`.raw() as RawRow[]);
}

export interface UserPage {
  /** The whole answer body, `{"users":[...],"total":N,"offset":N,"limit":N}` (UTF-8). */
  body: Buffer;
  userIds: string[];
  /** The team's version the page was read at (teams.version, see migrations/003). */
  version: string;
}

const LIST_START = Buffer.from('{"users":[');
const COMMA = Buffer.from(',');

type PageRow = [version: Buffer, total: Buffer, position: Buffer | null, userId: Buffer | null, doc: Buffer | null];

/**
 * One page in list order, with the team's total and version, in one
 * statement (one snapshot: total and page agree). Positions are dense per
 * team, so the page is the index range (offset, offset + limit], whatever
 * the offset; `total` is the team's counter. Rows, not string_agg: an
 * ordered aggregate made PostgreSQL sort and copy the page and cost it twice
 * the time (pgbench).
 *
 * Undefined: the team does not exist.
 */
export async function findUserPage(sql: Sql, teamId: string, offset: number, limit: number): Promise<UserPage | undefined> {
  const rows = await sql`
    SELECT t.version, t.user_count, u.position, u.user_id, u.doc
    FROM teams t
    LEFT JOIN LATERAL (
      SELECT position, user_id, doc FROM users
      WHERE team_id = t.team_id AND position > ${offset} AND position <= ${offset + limit}
      ORDER BY position
    ) u ON true
    WHERE t.team_id = ${teamId}`.raw() as unknown as PageRow[];
  const [first] = rows;
  if (!first) return undefined;
  return pageOf(rows, first[0].toString(), offset, limit);
}

function pageOf(rows: PageRow[], version: string, offset: number, limit: number): UserPage {
  const total = rows[0]![1].toString();
  // An empty page is one row with no user.
  if (rows[0]![3] === null) return { body: pageBody([], total, offset, limit), userIds: [], version };
  // Ordered by PostgreSQL in practice (one team row, then the index range); checked, not assumed.
  let ordered = true;
  let previous = 0;
  for (const row of rows) {
    const position = Number(row[2]!.toString());
    if (position < previous) ordered = false;
    previous = position;
  }
  if (!ordered) rows.sort((a, b) => Number(a[2]!.toString()) - Number(b[2]!.toString()));
  const docs: Buffer[] = [];
  const userIds: string[] = [];
  for (const row of rows) {
    if (docs.length > 0) docs.push(COMMA);
    docs.push(row[4]!);
    userIds.push(row[3]!.toString());
  }
  return { body: pageBody(docs, total, offset, limit), userIds, version };
}

function pageBody(docs: Buffer[], total: string, offset: number, limit: number): Buffer {
  return Buffer.concat([LIST_START, ...docs, Buffer.from(`],"total":${total},"offset":${offset},"limit":${limit}}`)]);
}

export interface NewUser {
  client_user_id: string;
  fallback_time_zone?: string;
  fallback_birth_date?: string;
  ingestion_start?: string;
  ingestion_end?: string;
}

export type CreateResult =
  | { created: true; user_id: string }
  | { created: false; existing: { user_id: string; created_on: string } };

/**
 * Creates a user. The team row is locked for the transaction: creates in one
 * team are serialised, which makes the duplicate check exact (two concurrent
 * creates of one client_user_id give one user) and lets the new user take the
 * next position when, as is normal, it sorts last.
 */
export async function createUser(sql: Sql, teamId: string, input: NewUser): Promise<CreateResult> {
  return sql.begin(async (tx) => {
    const [team] = await tx<{ user_count: string }[]>`
      SELECT user_count FROM teams WHERE team_id = ${teamId} FOR UPDATE`;
    if (!team) throw new Error(`team ${teamId} does not exist`);
    const [existing] = await tx<{ user_id: string; created_on: string }[]>`
      SELECT user_id, to_json(created_on) #>> '{}' AS created_on
      FROM users WHERE team_id = ${teamId} AND client_user_id = ${input.client_user_id}`;
    if (existing) return { created: false, existing };

    // The id and the time come from PostgreSQL, the time as PostgreSQL writes it, so the stored document matches the row.
    const [fresh] = await tx<{ user_id: string; now: string }[]>`
      SELECT gen_random_uuid() AS user_id, to_json(clock_timestamp()) #>> '{}' AS now`;
    const { user_id, now } = fresh!;
    const doc = userDocument({
      user_id, team_id: teamId, client_user_id: input.client_user_id, created_on: now, connected_sources: [],
      fallback_time_zone: input.fallback_time_zone ? { id: input.fallback_time_zone, source_slug: 'manual', updated_at: now } : null,
      fallback_birth_date: input.fallback_birth_date ? { value: input.fallback_birth_date, source_slug: 'manual', updated_at: now } : null,
      ingestion_start: input.ingestion_start ?? null, ingestion_end: input.ingestion_end ?? null,
    });
    const [row] = await tx<{ user_id: string; sorts_last: boolean }[]>`
      WITH last AS (
        SELECT created_on, user_id FROM users WHERE team_id = ${teamId} ORDER BY position DESC LIMIT 1
      )
      INSERT INTO users (
        user_id, team_id, client_user_id, created_on, position,
        fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
        fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
        ingestion_start, ingestion_end, doc)
      -- Times are bound as text: the driver would turn a timestamptz parameter into a JS Date and drop the microseconds.
      VALUES (
        ${user_id}, ${teamId}, ${input.client_user_id}, ${now}::text::timestamptz, ${Number(team.user_count) + 1},
        ${input.fallback_time_zone ?? null}, ${input.fallback_time_zone ? 'manual' : null},
        ${input.fallback_time_zone ? now : null}::text::timestamptz,
        ${input.fallback_birth_date ?? null}, ${input.fallback_birth_date ? 'manual' : null},
        ${input.fallback_birth_date ? now : null}::text::timestamptz,
        ${input.ingestion_start ?? null}, ${input.ingestion_end ?? null}, ${doc})
      RETURNING user_id,
        NOT EXISTS (SELECT 1 FROM last l WHERE (l.created_on, l.user_id) > (users.created_on, users.user_id)) AS sorts_last`;
    if (!row) throw new Error('insert returned no row');
    await tx`UPDATE teams SET user_count = user_count + 1, version = version + 1 WHERE team_id = ${teamId}`;
    // Only when the clock went backwards, or an import brought users from the future.
    if (!row.sorts_last) await renumberTeams(tx, [teamId]);
    return { created: true, user_id: row.user_id };
  });
}

/** Rewrites positions of the given teams to their dense rank in list order; only rows that move are written. */
export async function renumberTeams(sql: Queryable, teamIds: string[]): Promise<void> {
  await sql`
    UPDATE users u SET position = r.rn
    FROM (
      SELECT user_id, row_number() OVER (PARTITION BY team_id ORDER BY created_on, user_id) AS rn
      FROM users WHERE team_id = ANY(${teamIds}::uuid[])
    ) r
    WHERE u.user_id = r.user_id AND u.team_id = ANY(${teamIds}::uuid[]) AND u.position <> r.rn`;
}

import type { Sql } from '../db/client.js';
import { FRESH_BUFFERS, type BufferSource } from '../http/fast-path/answer-buffers.js';
import { PageBodyWriter } from './page-body.js';

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
  /** The JSON array of the returned users' ids, for the audit line; null when the page has none. */
  auditIds: string | null;
  /** The team's version the page was read at (teams.version, see migrations/003). */
  version: string;
  /** The buffer from the BufferSource that `body` lies in, to give back once the answer is sent; none for a body of its own. */
  lease?: Buffer;
  /** The team's holes as the page saw them (teams.holes_version and how many); none when it has none. */
  holes?: TeamHoles;
}

/** A team's holes at one version of them (teams.holes_version, migrations/017). */
export interface TeamHoles {
  version: string;
  count: number;
}

/** A copy of a team's holes: for the i-th hole in list order (1-based) at position p, p - i (the live users before it), ascending, at `holesVersion`. */
export interface HoleLives {
  holesVersion: string;
  lives: Float64Array;
}

/** A start worked out from a copy of the team's holes (src/users/hole-copies.ts), valid only at that version of them. */
export interface KnownStart {
  holesVersion: string;
  start: number;
}

/** The largest page (the list's `limit`): written as a literal in findUserPage's statement, which test/page-statement.test.ts checks. */
export const LARGEST_PAGE = 500;

type PageRow = [doc: Buffer | null, team: Buffer | null];

/**
 * One page in list order, with the team's total and version, in one
 * statement (one snapshot: total and page agree). The page is an index range
 * from the position of the user at `offset`: offset + 1 in a team whose
 * positions have no holes; `known.start` while the team's holes are still
 * at `known.holesVersion`; and otherwise found from the team's holes by
 * list_page_start (migrations/012, src/users/README.md). `total` is the
 * team's counter.
 *
 * The rows come in list order from the index range (no sort), the team's
 * version, total and holes on the first row only, in one text column (a
 * column for each, null on every other row, cost pages of 500 about 6% in
 * the bench), and the start is computed once per page:
 * why each of these, measured, in docs/decisions/page-statement.md;
 * test/page-statement.test.ts pins the plan.
 *
 * Undefined: the team does not exist.
 */
export async function findUserPage(sql: Sql, teamId: string, offset: number, limit: number, buffers: BufferSource = FRESH_BUFFERS, known?: KnownStart): Promise<UserPage | undefined> {
  if (!(limit >= 0 && limit <= LARGEST_PAGE)) throw new RangeError(`a page holds 0 to ${LARGEST_PAGE} users, not ${limit}`);
  if (limit === 0) return countOnly(sql, teamId, offset);
  const page = new PageBodyWriter(buffers, limit);
  let version: string | undefined;
  let total: string | undefined;
  let holes: TeamHoles | undefined;
  let rows = 0;
  try {
    await sql`
      SELECT u.doc,
             CASE WHEN u.position IS NULL OR u.position = s.start THEN s.team END
      FROM teams t
      CROSS JOIN LATERAL (
        SELECT CASE WHEN t.user_count = t.next_position - 1 THEN ${offset}::bigint + 1
                    WHEN t.holes_version = ${known?.holesVersion ?? null}::bigint THEN ${known?.start ?? null}::bigint
                    ELSE list_page_start(t.team_id, ${offset}, t.next_position - 1 - t.user_count) END AS start,
               t.version || ' ' || t.user_count
                 || CASE WHEN t.user_count <> t.next_position - 1 THEN ' ' || t.holes_version || ' ' || (t.next_position - 1 - t.user_count) ELSE '' END AS team
        OFFSET 0
      ) s
      LEFT JOIN LATERAL (
        SELECT position, doc FROM users
        WHERE team_id = t.team_id AND position >= s.start
        ORDER BY position LIMIT 500
      ) u ON true
      WHERE t.team_id = ${teamId}
      LIMIT ${limit}`.raw().forEach((row) => {
      const [doc, team] = row as unknown as PageRow;
      if (rows++ === 0) {
        if (team === null) throw new Error('the page statement returned a user before the team: rows out of order');
        const [teamVersion, teamTotal, holesVersion, holeCount] = team.toString().split(' ') as [string, string, string?, string?];
        version = teamVersion;
        total = teamTotal;
        if (holesVersion !== undefined && holeCount !== undefined) holes = { version: holesVersion, count: Number(holeCount) };
      }
      if (doc !== null) page.add(doc);
    });
  } catch (err) {
    page.abandon();
    throw err;
  }
  if (version === undefined || total === undefined) {
    page.abandon();
    return undefined;
  }
  const { body, buffer, auditIds } = page.finish(total, offset);
  return { body, auditIds, version, lease: buffer, holes };
}

/**
 * The team's holes as a copy keeps them (src/users/hole-copies.ts): for the
 * i-th hole in list order (1-based) at position p, p - i, how many live users
 * lie before it, ascending; with the version of the holes they are at, read
 * in the same snapshot. Each bucket's holes come as its first position and
 * its offsets (`first:o,o,…;…`), turned into positions here: numbering them
 * in SQL (unnest and a window) cost ten times as much. Undefined: the team
 * does not exist.
 */
export async function findHoleLives(sql: Sql, teamId: string): Promise<HoleLives | undefined> {
  const [row] = await sql`
    SELECT t.holes_version, t.next_position - 1 - t.user_count,
      (SELECT string_agg(((l.bucket - 1)::bigint * list_bucket_size() + 1)::text || ':' || array_to_string(l.holes, ','), ';' ORDER BY l.bucket)
       FROM list_holes l WHERE l.team_id = t.team_id AND l.holes <> '{}')
    FROM teams t WHERE t.team_id = ${teamId}`.raw();
  if (!row) return undefined;
  const lives = new Float64Array(Number(row[1]!.toString()));
  const read = row[2] ? livesFromBuckets(row[2], lives) : 0;
  if (read !== lives.length) throw new Error(`the team's holes (${read}) are not its positions given out less its users (${lives.length})`);
  return { holesVersion: row[0]!.toString(), lives };
}

const DIGIT_0 = 0x30, COLON = 0x3a, COMMA = 0x2c, SEMICOLON = 0x3b;

/**
 * Writes into `lives` the holes of `first:o,o,…;…` (ASCII), p - i for the
 * i-th at position p = first + o; returns how many. Byte by byte: 52,000
 * holes are read in about 2 ms, where splitting strings held the event loop
 * for about 10.
 */
function livesFromBuckets(text: Buffer, lives: Float64Array): number {
  let i = 0, first = 0, number = 0;
  for (let k = 0; k <= text.length; k++) {
    const byte = k < text.length ? text[k]! : SEMICOLON;
    if (byte === COLON) {
      first = number;
    } else if (byte === COMMA || byte === SEMICOLON) {
      if (i < lives.length) lives[i] = first + number - (i + 1);
      i++;
    } else {
      number = number * 10 + byte - DIGIT_0;
      continue;
    }
    number = 0;
  }
  return i;
}

/** limit=0: the total alone. */
async function countOnly(sql: Sql, teamId: string, offset: number): Promise<UserPage | undefined> {
  const [team] = await sql`
    SELECT version, user_count, holes_version, next_position - 1 - user_count FROM teams WHERE team_id = ${teamId}`.raw();
  if (!team) return undefined;
  const holes = Number(team[3]!.toString());
  return {
    body: Buffer.from(`{"users":[],"total":${team[1]!.toString()},"offset":${offset},"limit":0}`),
    auditIds: null,
    version: team[0]!.toString(),
    holes: holes > 0 ? { version: team[2]!.toString(), count: holes } : undefined,
  };
}

/** Whether the team has a user with this id scheduled for deletion (for the answer to a miss). */
export async function isScheduledForDeletion(sql: Sql, teamId: string, userId: string): Promise<boolean> {
  const rows = await sql`SELECT 1 FROM deleted_users WHERE team_id = ${teamId} AND user_id = ${userId}`;
  return rows.length > 0;
}

/** The team's live users whose user_id or client_user_id is `query`, in list order. */
export async function searchUserDocs(sql: Sql, teamId: string, query: string, queryIsUuid: boolean): Promise<UserDoc[]> {
  const rows = await sql`
    SELECT user_id, doc FROM users
    WHERE team_id = ${teamId} AND (client_user_id = ${query} OR user_id = ${queryIsUuid ? query : null}::uuid)
    ORDER BY position`.raw() as RawRow[];
  return rows.map((row) => ({ user_id: row[0]!.toString(), doc: row[1]! }));
}

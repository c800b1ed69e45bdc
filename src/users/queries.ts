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
}

/** The largest page (the list's `limit`): written as a literal in findUserPage's statement, which test/page-statement.test.ts checks. */
export const LARGEST_PAGE = 500;

type PageRow = [doc: Buffer | null, version: Buffer | null, total: Buffer | null];

/**
 * One page in list order, with the team's total and version, in one
 * statement (one snapshot: total and page agree). The page is an index range
 * from the position of the user at `offset`: offset + 1 in a team whose
 * positions have no holes, and otherwise found from the team's holes by
 * list_page_start (migrations/012, src/users/README.md). `total` is the
 * team's counter.
 *
 * The rows come in list order from the index range (no sort), the version
 * and total on the first row only, and the start is computed once per page:
 * why each of these, measured, in docs/decisions/page-statement.md;
 * test/page-statement.test.ts pins the plan.
 *
 * Undefined: the team does not exist.
 */
export async function findUserPage(sql: Sql, teamId: string, offset: number, limit: number, buffers: BufferSource = FRESH_BUFFERS): Promise<UserPage | undefined> {
  if (!(limit >= 0 && limit <= LARGEST_PAGE)) throw new RangeError(`a page holds 0 to ${LARGEST_PAGE} users, not ${limit}`);
  if (limit === 0) return countOnly(sql, teamId, offset);
  const page = new PageBodyWriter(buffers, limit);
  let version: string | undefined;
  let total: string | undefined;
  let rows = 0;
  try {
    await sql`
      SELECT u.doc,
             CASE WHEN u.position IS NULL OR u.position = s.start THEN t.version END,
             CASE WHEN u.position IS NULL OR u.position = s.start THEN t.user_count END
      FROM teams t
      CROSS JOIN LATERAL (
        SELECT CASE WHEN t.user_count = t.next_position - 1 THEN ${offset}::bigint + 1
                    ELSE list_page_start(t.team_id, ${offset}, t.next_position - 1 - t.user_count) END AS start
        OFFSET 0
      ) s
      LEFT JOIN LATERAL (
        SELECT position, doc FROM users
        WHERE team_id = t.team_id AND position >= s.start
        ORDER BY position LIMIT 500
      ) u ON true
      WHERE t.team_id = ${teamId}
      LIMIT ${limit}`.raw().forEach((row) => {
      const [doc, versionBytes, totalBytes] = row as unknown as PageRow;
      if (rows++ === 0) {
        if (versionBytes === null || totalBytes === null) throw new Error('the page statement returned a user before the team: rows out of order');
        version = versionBytes.toString();
        total = totalBytes.toString();
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
  return { body, auditIds, version, lease: buffer };
}

/** limit=0: the total alone. */
async function countOnly(sql: Sql, teamId: string, offset: number): Promise<UserPage | undefined> {
  const [team] = await sql`SELECT version, user_count FROM teams WHERE team_id = ${teamId}`.raw();
  if (!team) return undefined;
  return {
    body: Buffer.from(`{"users":[],"total":${team[1]!.toString()},"offset":${offset},"limit":0}`),
    auditIds: null,
    version: team[0]!.toString(),
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

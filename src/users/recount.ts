import type { Sql, Tx } from '../db/client.js';
import { documentDrifts } from '../writes/stored-documents.js';

/** One way a team's kept state differs from a recount of its users. */
export interface TeamDrift {
  team_id: string;
  /** What differs: a column of `teams`, `team_source_weeks`, or a property of the positions. */
  what: string;
  kept: string;
  counted: string;
}

/**
 * Recomputes every team's derived state from its users (or only the teams
 * in `teamIds`) and returns where what is kept differs; empty when all
 * agree. The counts in one REPEATABLE READ snapshot, so that writes
 * committed while it runs are never taken for a difference; the documents
 * after it, row by row. What is kept, and recounted here:
 *
 * - `teams.user_count`: the team's live users;
 * - `teams.connected_sources` and `team_source_weeks`: their connections,
 *   in all and by the week (Monday, UTC) they were made;
 * - `teams.next_position`: past every position held, live or scheduled;
 * - positions: distinct, and in list order (created_on, user_id);
 * - `list_holes`: the positions below next_position no live user holds;
 * - `list_hole_blocks`: the holes of `list_holes` counted per block of buckets,
 *   and the live users before each of its buckets;
 * - `list_hole_teams`: the live users before each of the team's blocks;
 * - `users.doc`: the document the user's columns and connections make.
 *
 * Every write must leave these right in its own transaction; `hds check`
 * runs this, and the tests and the bench call it after their writes.
 */
export async function recountTeams(sql: Sql, teamIds?: string[]): Promise<{ teams: number; drifts: TeamDrift[] }> {
  const counted = await sql.begin('ISOLATION LEVEL REPEATABLE READ READ ONLY', async (tx) => {
    await tx`SET LOCAL statement_timeout = 0`;
    const only = teamIds ?? null;
    const { teams, drifts } = await counters(tx, only);
    return { teams, drifts: [...drifts, ...await weeks(tx, only), ...await order(tx, only), ...await holes(tx, only), ...await holeBlocks(tx, only), ...await holeTeams(tx, only)] };
  });
  // The documents after the snapshot, in short statements of their own (documentDrifts): each row is read whole, so a
  // document and its columns always agree within it, and the check holds no lock on users for its whole length.
  return { teams: counted.teams, drifts: [...counted.drifts, ...await documents(sql, teamIds ?? null)] };
}

type Only = string[] | null;

async function counters(tx: Tx, only: Only): Promise<{ teams: number; drifts: TeamDrift[] }> {
  const rows = await tx<{ team_id: string; user_count: string; users: string; connected_sources: string; links: string; next_position: string; last: string }[]>`
    WITH t AS (SELECT * FROM teams WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[]))
    SELECT t.team_id, t.user_count::text, t.connected_sources::text, t.next_position::text,
      (SELECT count(*) FROM users u WHERE u.team_id = t.team_id)::text AS users,
      (SELECT count(*) FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = t.team_id)::text AS links,
      greatest((SELECT max(position) FROM users u WHERE u.team_id = t.team_id),
               (SELECT max(position) FROM deleted_users d WHERE d.team_id = t.team_id), 0)::text AS last
    FROM t`;
  const drifts: TeamDrift[] = [];
  for (const r of rows) {
    if (r.user_count !== r.users) drifts.push({ team_id: r.team_id, what: 'user_count', kept: r.user_count, counted: r.users });
    if (r.connected_sources !== r.links) drifts.push({ team_id: r.team_id, what: 'connected_sources', kept: r.connected_sources, counted: r.links });
    if (BigInt(r.next_position) <= BigInt(r.last)) {
      drifts.push({ team_id: r.team_id, what: 'next_position', kept: r.next_position, counted: `more than ${r.last}, the last position held` });
    }
  }
  return { teams: rows.length, drifts };
}

async function weeks(tx: Tx, only: Only): Promise<TeamDrift[]> {
  const rows = await tx<{ team_id: string; week: string; kept: string; counted: string }[]>`
    WITH kept AS (
      SELECT team_id, week, connections::bigint AS n FROM team_source_weeks
      WHERE connections <> 0 AND (${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[]))
    ), counted AS (
      SELECT u.team_id, source_week(us.created_on) AS week, count(*) AS n
      FROM user_sources us JOIN users u USING (user_id)
      WHERE ${only}::uuid[] IS NULL OR u.team_id = ANY(${only}::uuid[])
      GROUP BY 1, 2
    )
    SELECT team_id, week::text, coalesce(k.n, 0)::text AS kept, coalesce(c.n, 0)::text AS counted
    FROM kept k FULL JOIN counted c USING (team_id, week)
    WHERE k.n IS DISTINCT FROM c.n
    ORDER BY team_id, week`;
  return rows.map((r) => ({ team_id: r.team_id, what: `team_source_weeks ${r.week}`, kept: r.kept, counted: r.counted }));
}

async function order(tx: Tx, only: Only): Promise<TeamDrift[]> {
  const rows = await tx<{ team_id: string; misplaced: string; repeated: string }[]>`
    WITH a AS (
      SELECT team_id, user_id, created_on, position FROM users WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[])
      UNION ALL
      SELECT team_id, user_id, created_on, position FROM deleted_users WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[])
    ), r AS (
      SELECT team_id, position,
        row_number() OVER (PARTITION BY team_id ORDER BY created_on, user_id) AS by_time,
        row_number() OVER (PARTITION BY team_id ORDER BY position) AS by_position
      FROM a
    )
    SELECT team_id, count(*) FILTER (WHERE by_time <> by_position)::text AS misplaced, (count(*) - count(DISTINCT position))::text AS repeated
    FROM r GROUP BY team_id
    HAVING count(*) FILTER (WHERE by_time <> by_position) > 0 OR count(*) <> count(DISTINCT position)`;
  return rows.flatMap((r) => [
    ...(r.misplaced !== '0' ? [{ team_id: r.team_id, what: 'users out of list order by position', kept: r.misplaced, counted: '0' }] : []),
    ...(r.repeated !== '0' ? [{ team_id: r.team_id, what: 'positions held twice', kept: r.repeated, counted: '0' }] : []),
  ]);
}

async function holes(tx: Tx, only: Only): Promise<TeamDrift[]> {
  const rows = await tx<{ team_id: string; buckets: string }[]>`
    WITH t AS (SELECT team_id FROM teams WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[])),
    counted AS (SELECT t.team_id, h.bucket, h.holes FROM t CROSS JOIN LATERAL list_holes_of(t.team_id) h),
    kept AS (SELECT team_id, bucket, holes FROM list_holes WHERE holes <> '{}' AND team_id IN (SELECT team_id FROM t))
    SELECT team_id, count(*)::text AS buckets
    FROM kept k FULL JOIN counted c USING (team_id, bucket)
    WHERE k.holes IS DISTINCT FROM c.holes
    GROUP BY team_id`;
  return rows.map((r) => ({ team_id: r.team_id, what: 'list_holes buckets miscounted', kept: r.buckets, counted: '0' }));
}

async function holeBlocks(tx: Tx, only: Only): Promise<TeamDrift[]> {
  // Against list_holes as kept, which holes() checks against the users: both right, or a drift named.
  const rows = await tx<{ team_id: string; blocks: string }[]>`
    WITH t AS (SELECT team_id FROM teams WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[])),
    counted AS (
      SELECT team_id, list_block_of(bucket) AS block, sum(cardinality(holes)) AS holes
      FROM list_holes WHERE team_id IN (SELECT team_id FROM t) GROUP BY 1, 2 HAVING sum(cardinality(holes)) <> 0
    ),
    -- Rows whose holes undos refilled stay: a page still searches their thresholds.
    kept AS (SELECT team_id, block, holes::bigint, bucket_starts FROM list_hole_blocks WHERE team_id IN (SELECT team_id FROM t))
    SELECT team_id, count(*)::text AS blocks
    FROM kept k FULL JOIN counted c USING (team_id, block)
    WHERE coalesce(k.holes, 0) <> coalesce(c.holes, 0)
       OR (k.bucket_starts IS NOT NULL AND k.bucket_starts <> list_bucket_starts_of(team_id, block))
    GROUP BY team_id`;
  return rows.map((r) => ({ team_id: r.team_id, what: 'list_hole_blocks miscounted', kept: r.blocks, counted: '0' }));
}

async function holeTeams(tx: Tx, only: Only): Promise<TeamDrift[]> {
  // Against list_hole_blocks as kept, which holeBlocks() checks. Undos leave the thresholds past the team's last
  // block with holes in place: the kept array may run on past the counted one, with no hole in what it adds.
  const rows = await tx<{ team_id: string }[]>`
    WITH counted AS (
      SELECT team_id, list_block_starts_of(team_id) AS starts FROM teams
      WHERE ${only}::uuid[] IS NULL OR team_id = ANY(${only}::uuid[])
    )
    SELECT c.team_id FROM counted c LEFT JOIN list_hole_teams k USING (team_id)
    WHERE CASE WHEN k.block_starts IS NULL THEN c.starts IS NOT NULL
               ELSE cardinality(k.block_starts) < coalesce(cardinality(c.starts), 1)
                 OR k.block_starts <> list_starts_extended(coalesce(c.starts, '{0}'), cardinality(k.block_starts), list_block_positions()) END`;
  return rows.map((r) => ({ team_id: r.team_id, what: 'list_hole_teams miscounted', kept: '1', counted: '0' }));
}

async function documents(sql: Sql, only: Only): Promise<TeamDrift[]> {
  const drifts = await documentDrifts(sql, only ? { teamIds: only } : {});
  const perTeam = new Map<string, string[]>();
  for (const d of drifts) perTeam.set(d.team_id, [...(perTeam.get(d.team_id) ?? []), d.user_id]);
  return [...perTeam].map(([team_id, users]) => ({
    team_id, what: `stored documents that differ from their columns (users ${users.slice(0, 3).join(', ')}${users.length > 3 ? ', …' : ''})`,
    kept: String(users.length), counted: '0',
  }));
}

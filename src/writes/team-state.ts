import type { PendingQuery, Row } from 'postgres';
import type { Queryable, Sql, Tx } from '../db/client.js';

/**
 * The one owner of a team's derived state: what is kept about a team's
 * users so that reads need not count them (docs/schema.md):
 *
 * - `teams.version`, raised by every change of the team's users, so that
 *   cached pages and metrics are answered again;
 * - `teams.user_count`, `teams.connected_sources` and `team_source_weeks`;
 * - the positions: `teams.next_position`, the holes per bucket
 *   (`list_holes`), and the live users before each bucket of a block
 *   (`list_hole_blocks`) and before each block of the team
 *   (`list_hole_teams`), from which a page finds where it starts
 *   (src/users/README.md), and `teams.holes_version`, raised by every
 *   statement that writes those three tables, which copies of the holes
 *   in memory are checked against.
 *
 * Every write to a team's users says here what it changed, in its own
 * transaction; nothing else writes these (the `teams` row itself is created
 * and deleted in src/teams/team-store.ts). `hds check` (recount.ts) recounts
 * all of it from the users. A purge changes none of it: the purged user was
 * out of the counts since its deletion, and its position stays a hole until
 * the purge pass compacts the team (compactSparseTeams).
 *
 * The events of a change (contract section 10) are recorded here too, in
 * the same statement: a change that commits has them, one that rolls back
 * has none. Each goes to the team's enabled webhook endpoints whose
 * filter_types hold its type, as one message each (src/events/ delivers
 * them; migrations/011).
 *
 * Two forms. `teamChange` gives the common-table expressions that a
 * single-statement write (create, patch, delete, undo, connect, disconnect)
 * ends with, so that the team's row is locked only for that statement and its
 * commit. The functions after it are whole statements, for writes made of
 * several (the import, a renumbering, the bench's restore).
 */

/**
 * What one statement changed in one team, each as the name of a relation
 * (a common-table expression) of that statement.
 */
export interface UsersChanged {
  /** Users placed at the team's next positions, one row each (in position order). */
  appended?: string;
  /** The user that left the list (a deletion): at most one row, with its `position`. */
  left?: string;
  /** The user back in the list at its old position (an undo): at most one row, with its `position`. */
  returned?: string;
  /** Connections removed from the team's live users: one row each, with its `created_on`. */
  unlinked?: string;
  /** Connections added to the team's live users: one row each, with its `created_on` (not with `unlinked`). */
  linked?: string;
  /** Any row: the team's users changed otherwise (a stored document); only the version moves. */
  changed?: string;
  /**
   * The events of the change, one row each: `event_type`, `user_id`,
   * `client_user_id` and `data` (the event's data as JSON text), in the
   * order they happened.
   */
  events?: string;
}

type Fragment = PendingQuery<Row[]>;

/**
 * The common-table expressions that keep the team's state after the
 * statement's own, which name the relations of `change`: `WITH …, ${teamChange(…)} SELECT …`.
 * The team's row is written only when one of them has a row.
 */
export function teamChange(sql: Queryable, teamId: string, change: UsersChanged): Fragment {
  const count = (relation: string | undefined) => (relation ? sql`(SELECT count(*)::int FROM ${sql(relation)})` : sql`0`);
  const position = (relation: string | undefined) => (relation ? sql`(SELECT max(position) FROM ${sql(relation)})` : sql`NULL::bigint`);
  const any = change.changed ? sql`EXISTS (SELECT 1 FROM ${sql(change.changed)})` : sql`false`;
  if (change.linked && change.unlinked) throw new Error('teamChange: a statement links or unlinks, not both');
  const parts: Fragment[] = [sql`
    team_delta AS (
      SELECT ${count(change.appended)} AS appended, ${position(change.left)} AS left_at,
        ${position(change.returned)} AS returned_at, ${count(change.unlinked)} AS unlinked,
        ${count(change.linked)} AS linked, ${any} AS changed
    )`];
  if (change.unlinked) {
    parts.push(sql`
    team_weeks AS (
      UPDATE team_source_weeks w SET connections = w.connections - c.n
      FROM (SELECT source_week(created_on) AS week, count(*)::int AS n FROM ${sql(change.unlinked)} GROUP BY 1) c
      WHERE w.team_id = ${teamId} AND w.week = c.week
    )`);
  }
  if (change.linked) {
    parts.push(sql`
    team_weeks AS (
      INSERT INTO team_source_weeks AS w (team_id, week, connections)
      SELECT ${teamId}, source_week(created_on), count(*)::int FROM ${sql(change.linked)} GROUP BY 2
      ON CONFLICT (team_id, week) DO UPDATE SET connections = w.connections + excluded.connections
    )`);
  }
  if (change.events) parts.push(...teamEvents(sql, teamId, change.events));
  // Where the hole opened or filled lies (positions: migrations/008, 012), worked out once for the statement.
  const hole = (column: string) => sql`
    team_hole AS (
      SELECT list_bucket_of(d.${sql(column)}) AS bucket, list_offset_of(d.${sql(column)}) AS bucket_offset,
        list_block_of(list_bucket_of(d.${sql(column)})) AS block, list_bucket_in_block(list_bucket_of(d.${sql(column)})) AS in_block
      FROM team_delta d WHERE d.${sql(column)} IS NOT NULL
    )`;
  if (change.left) {
    parts.push(hole('left_at'), sql`
    team_holes_opened AS (
      INSERT INTO list_holes AS h (team_id, bucket, holes)
      SELECT ${teamId}, p.bucket, ARRAY[p.bucket_offset] FROM team_hole p
      ON CONFLICT (team_id, bucket) DO UPDATE SET holes = (SELECT array_agg(o ORDER BY o) FROM unnest(h.holes || excluded.holes) AS o)
    )`, sql`
    team_hole_blocks_opened AS (
      INSERT INTO list_hole_blocks AS b (team_id, block, holes, bucket_starts)
      SELECT ${teamId}, p.block, 1, list_starts_shifted(list_starts_extended('{0}', list_block_size(), list_bucket_size()), p.in_block, -1)
      FROM team_hole p
      ON CONFLICT (team_id, block) DO UPDATE SET holes = b.holes + 1,
        bucket_starts = (SELECT list_starts_shifted(b.bucket_starts, p.in_block, -1) FROM team_hole p)
    )`, sql`
    team_hole_starts_opened AS (
      INSERT INTO list_hole_teams AS s (team_id, block_starts)
      SELECT ${teamId}, list_starts_shifted(list_starts_extended('{0}', p.block + 1, list_block_positions()), p.block, -1)
      FROM team_hole p
      -- The team's thresholds reach one block past its last with holes: grown to past this one first.
      ON CONFLICT (team_id) DO UPDATE SET
        block_starts = (SELECT list_starts_shifted(list_starts_extended(s.block_starts, p.block + 1, list_block_positions()), p.block, -1) FROM team_hole p)
    )`);
  }
  if (change.returned) {
    parts.push(hole('returned_at'), sql`
    team_holes_filled AS (
      UPDATE list_holes h SET holes = array_remove(h.holes, p.bucket_offset)
      FROM team_hole p WHERE h.team_id = ${teamId} AND h.bucket = p.bucket
    )`, sql`
    team_hole_blocks_filled AS (
      UPDATE list_hole_blocks b SET holes = b.holes - 1, bucket_starts = list_starts_shifted(b.bucket_starts, p.in_block, 1)
      FROM team_hole p WHERE b.team_id = ${teamId} AND b.block = p.block
    )`, sql`
    team_hole_starts_filled AS (
      UPDATE list_hole_teams s SET block_starts = list_starts_shifted(s.block_starts, p.block, 1)
      FROM team_hole p WHERE s.team_id = ${teamId}
    )`);
  }
  parts.push(sql`
    team_row AS (
      UPDATE teams t SET
        version = t.version + 1,
        holes_version = t.holes_version + (d.left_at IS NOT NULL OR d.returned_at IS NOT NULL)::int,
        user_count = t.user_count + d.appended - (d.left_at IS NOT NULL)::int + (d.returned_at IS NOT NULL)::int,
        next_position = t.next_position + d.appended,
        connected_sources = t.connected_sources - d.unlinked + d.linked
      FROM team_delta d
      WHERE t.team_id = ${teamId}
        AND (d.appended > 0 OR d.left_at IS NOT NULL OR d.returned_at IS NOT NULL OR d.unlinked > 0 OR d.linked > 0 OR d.changed)
    )`);
  return parts.reduce((all, part) => sql`${all},${part}`);
}

/**
 * The events of `relation` recorded with the envelope of section 10 as
 * their body, and one message each for every enabled endpoint of the team
 * that takes its type. The messages' insert wakes the dispatchers as it
 * commits (a trigger's NOTIFY); a team without endpoints pays no NOTIFY.
 */
function teamEvents(sql: Queryable, teamId: string, relation: string): Fragment[] {
  return [sql`
    team_events AS (
      INSERT INTO events (team_id, user_id, event_type, body)
      SELECT ${teamId}, e.user_id, e.event_type,
        '{"event_type":"' || e.event_type || '","data":' || e.data || ',"user_id":"' || e.user_id
          || '","client_user_id":' || to_json(e.client_user_id::text)::text || ',"team_id":"' || ${teamId}::uuid || '"}'
      FROM ${sql(relation)} e
      RETURNING event_id, event_type, created_at
    )`, sql`
    team_messages AS (
      INSERT INTO webhook_messages (event_id, endpoint_id, created_at)
      SELECT e.event_id, w.endpoint_id, e.created_at
      FROM team_events e JOIN webhook_endpoints w
        ON w.team_id = ${teamId} AND NOT w.disabled AND (w.filter_types IS NULL OR e.event_type = ANY (w.filter_types))
    )`];
}

/** Locks the teams (in id order, as every writer does) for the rest of the transaction; returns their ids. */
export async function lockTeams(tx: Tx, teamIds: string[]): Promise<string[]> {
  const locked = await tx<{ team_id: string }[]>`
    SELECT team_id FROM teams WHERE team_id = ANY(${teamIds}::uuid[]) ORDER BY team_id FOR UPDATE`;
  return locked.map((t) => t.team_id);
}

/** The teams' users changed (documents rewritten): their versions move. */
export async function usersChanged(tx: Tx, teamIds: string[]): Promise<void> {
  if (teamIds.length === 0) return;
  await tx`UPDATE teams SET version = version + 1 WHERE team_id = ANY(${teamIds}::uuid[])`;
}

/**
 * Teams whose users changed, each with `added` users appended at its next
 * positions (0 when only existing users changed): counts, positions and
 * versions follow.
 */
export async function usersAppended(tx: Tx, teams: { teamIds: string[]; added: number[] }): Promise<void> {
  await tx`
    UPDATE teams t SET user_count = t.user_count + a.n, version = t.version + 1,
      next_position = t.next_position + a.n
    FROM unnest(${teams.teamIds}::uuid[], ${teams.added}::int[]) AS a(team_id, n)
    WHERE t.team_id = a.team_id`;
}

/**
 * Connections of live users added (n > 0) and removed (n < 0), by team and
 * week: `delta` yields (team_id, week, n).
 */
export async function connectionsChanged(tx: Tx, delta: Fragment): Promise<void> {
  await tx`
    WITH delta AS (${delta}), weeks AS (
      INSERT INTO team_source_weeks AS w (team_id, week, connections) SELECT team_id, week, n FROM delta
      ON CONFLICT (team_id, week) DO UPDATE SET connections = w.connections + excluded.connections
    )
    UPDATE teams t SET connected_sources = t.connected_sources + d.n
    FROM (SELECT team_id, sum(n) AS n FROM delta GROUP BY 1) d WHERE t.team_id = d.team_id`;
}

/**
 * Teams whose users were all just loaded at positions 1..n (the bulk
 * import), n and their connections counted while loading: no holes,
 * their week counts set.
 */
export async function teamsLoaded(tx: Tx, loaded: {
  teamIds: string[]; users: number[]; connections: number[];
  weeks: { teamIds: string[]; weeks: string[]; counts: number[] };
}): Promise<void> {
  await tx`
    UPDATE teams t SET user_count = c.n, version = t.version + 1,
      next_position = c.n + 1, connected_sources = c.links
    FROM unnest(${loaded.teamIds}::uuid[], ${loaded.users}::int[], ${loaded.connections}::int[]) AS c(team_id, n, links)
    WHERE t.team_id = c.team_id`;
  await forgetHoles(tx, loaded.teamIds);
  await tx`
    INSERT INTO team_source_weeks (team_id, week, connections)
    SELECT * FROM unnest(${loaded.weeks.teamIds}::uuid[], ${loaded.weeks.weeks}::date[], ${loaded.weeks.counts}::int[])
    ON CONFLICT (team_id, week) DO UPDATE SET connections = excluded.connections`;
}

/**
 * Gives the team's users, live and scheduled for deletion, their rank in
 * list order as positions (only rows that move are written), then recounts
 * the team: for the rare user that arrives sorting before others (a clock
 * that went back). Positions of purged users are taken again.
 */
export async function renumberTeam(tx: Tx, teamId: string): Promise<void> {
  await tx`
    WITH ranked AS (
      SELECT user_id, row_number() OVER (ORDER BY created_on, user_id) AS rank
      FROM (SELECT user_id, created_on FROM users WHERE team_id = ${teamId}
            UNION ALL
            SELECT user_id, created_on FROM deleted_users WHERE team_id = ${teamId}) a
    ), live AS (
      UPDATE users u SET position = r.rank FROM ranked r
      WHERE u.user_id = r.user_id AND u.team_id = ${teamId} AND u.position <> r.rank
    )
    UPDATE deleted_users d SET position = r.rank FROM ranked r
    WHERE d.user_id = r.user_id AND d.team_id = ${teamId} AND d.position <> r.rank`;
  await recountTeamState(tx, [teamId]);
}

/**
 * The teams' holes, at every level, gone, and their holes' version raised
 * (a copy of the old holes must not be taken for the new): before a recount
 * or a bulk load (src/teams/team-store.ts, below this module, clears a
 * deleted team's own).
 */
async function forgetHoles(tx: Tx, teamIds: string[]): Promise<void> {
  await tx`UPDATE teams SET holes_version = holes_version + 1 WHERE team_id = ANY(${teamIds}::uuid[])`;
  await tx`DELETE FROM list_holes WHERE team_id = ANY(${teamIds}::uuid[])`;
  await tx`DELETE FROM list_hole_blocks WHERE team_id = ANY(${teamIds}::uuid[])`;
  await tx`DELETE FROM list_hole_teams WHERE team_id = ANY(${teamIds}::uuid[])`;
}

/**
 * Sets every piece of the teams' derived state from their users as they
 * stand: after a write that moved positions wholesale (a renumbering, an
 * import that ranks a team anew) or put rows back by hand (the bench's
 * restore). The next position follows the last one held, live or scheduled.
 */
export async function recountTeamState(tx: Tx, teamIds: string[]): Promise<void> {
  if (teamIds.length === 0) return;
  await tx`
    UPDATE teams t SET version = t.version + 1,
      user_count = (SELECT count(*) FROM users u WHERE u.team_id = t.team_id),
      next_position = greatest((SELECT max(position) FROM users u WHERE u.team_id = t.team_id),
                               (SELECT max(position) FROM deleted_users d WHERE d.team_id = t.team_id), 0) + 1,
      connected_sources = (SELECT count(*) FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = t.team_id)
    WHERE t.team_id = ANY(${teamIds}::uuid[])`;
  await tx`DELETE FROM team_source_weeks WHERE team_id = ANY(${teamIds}::uuid[])`;
  await tx`
    INSERT INTO team_source_weeks (team_id, week, connections)
    SELECT u.team_id, source_week(us.created_on), count(*)
    FROM user_sources us JOIN users u USING (user_id)
    WHERE u.team_id = ANY(${teamIds}::uuid[])
    GROUP BY 1, 2`;
  await forgetHoles(tx, teamIds);
  await tx`
    INSERT INTO list_holes (team_id, bucket, holes)
    SELECT t.team_id, h.bucket, h.holes FROM unnest(${teamIds}::uuid[]) AS t(team_id) CROSS JOIN LATERAL list_holes_of(t.team_id) h`;
  await tx`
    INSERT INTO list_hole_blocks (team_id, block, holes, bucket_starts)
    SELECT b.team_id, b.block, b.holes, list_bucket_starts_of(b.team_id, b.block)
    FROM (SELECT team_id, list_block_of(bucket) AS block, sum(cardinality(holes)) AS holes FROM list_holes
          WHERE team_id = ANY(${teamIds}::uuid[]) GROUP BY 1, 2) b`;
  await tx`
    INSERT INTO list_hole_teams (team_id, block_starts)
    SELECT t.team_id, s.starts FROM unnest(${teamIds}::uuid[]) AS t(team_id) CROSS JOIN LATERAL list_block_starts_of(t.team_id) AS s(starts)
    WHERE s.starts IS NOT NULL`;
}

/**
 * A team compacts once users purged for good hold a quarter of the
 * positions given out: their holes are paged over until then, and with
 * churn (users created and erased) would otherwise grow without bound.
 */
const COMPACT_AT_SHARE = 0.25;

/**
 * Closes the holes of purged users in every team where they have reached
 * COMPACT_AT_SHARE of its positions: the team's users are renumbered in
 * list order (renumberTeam), one team per transaction, the team's row
 * locked for it as by any write (a write that meets it mid-statement may
 * deadlock with it: one of the two is rolled back, the write retried, the
 * compaction tried again at the next pass). Returns the teams compacted
 * (only among `teamIds` when given). Run by the purge pass, after it purged.
 */
export async function compactSparseTeams(sql: Sql, teamIds?: string[]): Promise<string[]> {
  const only = teamIds ?? null;
  // All holes past the share (read from the team's row) first: only those teams have their scheduled users counted.
  const sparse = await sql<{ team_id: string }[]>`
    SELECT t.team_id FROM teams t
    WHERE (${only}::uuid[] IS NULL OR t.team_id = ANY(${only}::uuid[]))
      AND t.next_position - 1 - t.user_count >= ${COMPACT_AT_SHARE}::float8 * (t.next_position - 1) AND t.next_position > 1
      AND t.next_position - 1 - t.user_count - (SELECT count(*) FROM deleted_users d WHERE d.team_id = t.team_id)
          >= greatest(1, ${COMPACT_AT_SHARE}::float8 * (t.next_position - 1))`;
  for (const { team_id: teamId } of sparse) {
    await sql.begin(async (tx) => {
      if ((await lockTeams(tx, [teamId])).length > 0) await renumberTeam(tx, teamId);
    });
  }
  return sparse.map((t) => t.team_id);
}

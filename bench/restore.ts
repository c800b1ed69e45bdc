/**
 * Puts the biggest team back as the import left it after the write
 * scenarios, so that `--reuse` keeps measuring the dataset it was imported
 * from.
 *
 * An undo alone would not do: undo_delete restores a user without its
 * connected sources (the contract's section 8), created users stay, PATCH
 * leaves the new time zones, and a create moves the team's next position on,
 * which leaves a hole at the end of its positions once the created users are
 * gone (and a team with holes finds each page's start from its holes instead
 * of the arithmetic fast path, src/users/README.md). So, before the first write, every
 * user the writes may touch is saved (the write pool, the users the
 * after-deletes step deletes, the first and the last user), with its
 * connections, the team's row and its week counts, into tables of a schema
 * of the benchmark's own (bench_saved); afterwards, in one transaction, the
 * created users and every scheduled deletion of the team are removed, the
 * saved rows are written back, the team's state recounted from its users
 * (src/users/team-state.ts), and the result is checked against the saved. The rows written back then lie elsewhere in the table than the
 * import put them; CLUSTER puts the table back in list order (as the import
 * writes it), so that a page reads as many heap pages as before.
 *
 * While the writes run, the marker that `--reuse` trusts is removed
 * (bench/database.ts): a run that dies before the end leaves a database that
 * the next run imports again.
 */
import type postgres from 'postgres';
import { recountTeamState } from '../src/writes/team-state.js';

export interface SavedTeam {
  teamId: string;
  /** Users of the team in the dataset: positions 1..users, no holes. */
  users: number;
}

/** Refuses to save a team that is not as an import leaves it: what is put back must be the dataset. */
async function checkAsImported(sql: postgres.Sql, team: SavedTeam): Promise<void> {
  const [row] = await sql<{ user_count: string; next_position: string; deleted: string }[]>`
    SELECT t.user_count::text, t.next_position::text,
      (SELECT count(*) FROM deleted_users d WHERE d.team_id = t.team_id)::text AS deleted
    FROM teams t WHERE t.team_id = ${team.teamId}`;
  if (!row || Number(row.user_count) !== team.users || Number(row.next_position) !== team.users + 1 || Number(row.deleted) !== 0) {
    throw new Error(`the biggest team is not as imported (${JSON.stringify(row)}, expected ${team.users} users at positions 1..${team.users}, none deleted): run without --reuse`);
  }
}

/** Saves what the writes may change: these users (and the team's first and last), their connections, the team's counters. */
export async function saveBeforeWrites(sql: postgres.Sql, team: SavedTeam, userIds: string[]): Promise<void> {
  await checkAsImported(sql, team);
  await sql.begin(async (tx) => {
    await tx`DROP SCHEMA IF EXISTS bench_saved CASCADE`;
    await tx`CREATE SCHEMA bench_saved`;
    for (const table of ['users', 'user_sources', 'teams', 'team_source_weeks']) {
      await tx.unsafe(`CREATE UNLOGGED TABLE bench_saved.${table} (LIKE public.${table})`);
    }
    await tx`
      INSERT INTO bench_saved.users SELECT * FROM users
      WHERE team_id = ${team.teamId} AND (user_id = ANY(${userIds}::uuid[]) OR position IN (1, ${team.users}))`;
    await tx`INSERT INTO bench_saved.user_sources SELECT us.* FROM user_sources us JOIN bench_saved.users u USING (user_id)`;
    await tx`INSERT INTO bench_saved.teams SELECT * FROM teams WHERE team_id = ${team.teamId}`;
    await tx`INSERT INTO bench_saved.team_source_weeks SELECT * FROM team_source_weeks WHERE team_id = ${team.teamId}`;
  });
}

/** Differences between the team and what was saved (0 everywhere when it is back). */
async function differences(sql: postgres.Sql, team: SavedTeam): Promise<Record<string, number>> {
  const [row] = await sql<Record<string, string>[]>`
    SELECT
      (SELECT count(*) FROM users WHERE team_id = ${team.teamId}) - ${team.users} AS "users",
      (SELECT count(*) FROM deleted_users WHERE team_id = ${team.teamId}) AS "scheduled deletions",
      (SELECT count(*) FROM list_holes WHERE team_id = ${team.teamId}) AS "buckets with holes",
      (SELECT count(*) FROM list_hole_blocks WHERE team_id = ${team.teamId}) AS "blocks with holes",
      (SELECT count(*) FROM list_hole_teams WHERE team_id = ${team.teamId}) AS "team thresholds",
      (SELECT count(*) FROM bench_saved.users s LEFT JOIN users u USING (user_id) WHERE u.user_id IS NULL OR u::text <> s::text) AS "saved users changed",
      (SELECT count(*) FROM bench_saved.user_sources s LEFT JOIN user_sources us USING (user_id, source_id) WHERE us.user_id IS NULL OR us::text <> s::text) AS "saved connections changed",
      (SELECT count(*) FROM bench_saved.teams s JOIN teams t USING (team_id)
       WHERE (t.user_count, t.next_position, t.connected_sources) IS DISTINCT FROM (s.user_count, s.next_position, s.connected_sources)) AS "team counters changed",
      (SELECT count(*) FROM (
        (SELECT * FROM bench_saved.team_source_weeks EXCEPT SELECT * FROM team_source_weeks WHERE team_id = ${team.teamId})
        UNION ALL
        (SELECT * FROM team_source_weeks WHERE team_id = ${team.teamId} EXCEPT SELECT * FROM bench_saved.team_source_weeks)) w) AS "week counts changed",
      (SELECT t.connected_sources - (SELECT count(*) FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${team.teamId})
       FROM teams t WHERE t.team_id = ${team.teamId}) AS "connections miscounted"`;
  return Object.fromEntries(Object.entries(row!).map(([k, v]) => [k, Number(v)]));
}

/**
 * Puts the team back as saved, checks it, then lays the table out in list
 * order again. Throws when anything differs (the caller leaves the marker
 * removed: the next --reuse imports again).
 */
export async function restoreAfterWrites(sql: postgres.Sql, team: SavedTeam): Promise<void> {
  await sql.begin(async (tx) => {
    // The users the benchmark created: a create takes the team's next position, past every dataset user's.
    await tx`DELETE FROM users WHERE team_id = ${team.teamId} AND position > ${team.users}`;
    // Every scheduled deletion of the team is the benchmark's (there were none before: checkAsImported). The purge's own
    // step: the row goes for good; its connections went at deletion.
    await tx`DELETE FROM deleted_users WHERE team_id = ${team.teamId}`;
    await tx`DELETE FROM user_sources WHERE user_id IN (SELECT user_id FROM bench_saved.users)`;
    await tx`DELETE FROM users WHERE user_id IN (SELECT user_id FROM bench_saved.users)`;
    await tx`INSERT INTO users SELECT * FROM bench_saved.users`;
    await tx`INSERT INTO user_sources SELECT * FROM bench_saved.user_sources`;
    // Counts, positions, holes and week counts from the users as they are back (a new version too, so that
    // any page a running service holds for the team is read again); differences() compares them with the saved.
    await recountTeamState(tx, [team.teamId]);
  });
  const left = Object.entries(await differences(sql, team)).filter(([, n]) => n !== 0);
  if (left.length > 0) throw new Error(`the biggest team is not back as imported after the writes: ${left.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  await sql`DROP SCHEMA bench_saved CASCADE`;
  // List order on disk again (the import writes each team's users in list order), and fresh statistics.
  await sql`CLUSTER users USING users_team_position`;
  await sql`VACUUM (ANALYZE) users, user_sources, deleted_users, teams, team_source_weeks, list_holes, list_hole_blocks, list_hole_teams`;
}

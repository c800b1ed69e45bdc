import type { Tx } from '../db/client.js';
import { copyTuples, writeCopy } from '../db/copy-binary.js';
import { isUniqueViolation } from '../db/errors.js';
import { buildShadowIndexes, createShadow, planRebuild, swapInShadow, type RebuildPlan } from '../db/table-rebuild.js';
import { linkCounts, linkTuples, PROGRESS_EVERY, type ImportContext, type ImportSummary } from './context.js';
import { USER_COLUMNS } from './spool.js';
import { teamsLoaded } from '../writes/team-state.js';
import { rebuildDocumentsOfSources } from '../writes/stored-documents.js';

/** Below this many users a merge is quick anyway, and nothing is worth rebuilding the tables for. */
const BULK_MIN_USERS = 10_000;
/** How long the swap may wait for the tables' other users (readers, creates) before the import gives up. */
const SWAP_LOCK_TIMEOUT = '10s';

/**
 * The bulk path: the file's users are written into new users and
 * user_sources tables together with every stored row, the indexes are built
 * after the rows, and the new tables replace the old ones at commit
 * (src/db/table-rebuild.ts). It applies when every team of the file has no
 * users yet (there is nothing to merge with) and, unless forced, when the
 * file brings at least as many users as the table holds (copying the stored
 * rows then costs at most as much as loading the new ones).
 *
 * Creates keep working meanwhile: a team whose version (migrations/003)
 * moved while the new table was filled has its rows copied again, under the
 * exclusive lock of the swap.
 *
 * A user_id or client_user_id that is not unique shows as a failed index
 * build: the whole attempt is rolled back to its savepoint and the caller
 * merges instead, whose checks name the line.
 */
export async function bulkImport(tx: Tx, ctx: ImportContext, o: { onlyWhenWorthIt: boolean }): Promise<ImportSummary | { impossible: string }> {
  const { spool } = ctx;
  if (o.onlyWhenWorthIt && spool.users < BULK_MIN_USERS) return { impossible: `fewer than ${BULK_MIN_USERS} users` };
  const [occupied] = await tx`
    SELECT 1 FROM users WHERE team_id = ANY(${ctx.teamIds}::uuid[])
    UNION ALL SELECT 1 FROM deleted_users WHERE team_id = ANY(${ctx.teamIds}::uuid[])
    LIMIT 1`;
  if (occupied) return { impossible: 'a team of the file has users already (or users scheduled for deletion)' };
  if (o.onlyWhenWorthIt) {
    const [stored] = await tx<{ n: number }[]>`SELECT count(*)::int AS n FROM (SELECT 1 FROM users LIMIT ${spool.users + 1}) s`;
    if (stored!.n > spool.users) return { impossible: 'the table holds more users than the file brings' };
  }
  const users = await planRebuild(tx, 'users');
  if ('impossible' in users) return users;
  const links = await planRebuild(tx, 'user_sources');
  if ('impossible' in links) return links;

  // Documents of stored users that a renamed source changes: rewritten in place first, so that they are copied as they must be.
  await rebuildDocumentsOfSources(tx, ctx.renamedSourceIds);
  try {
    return await tx.savepoint(async (sp) => {
      const perTeam = await load(sp, ctx, users, links);
      // The teams' users hold positions 1..n; their links were counted while encoding.
      const counted = linkCounts(spool);
      await teamsLoaded(sp, { teamIds: spool.teamIds, users: perTeam, connections: counted.perTeam, weeks: counted.weeks });
      return {
        lines: spool.users, teams: ctx.newTeams, inserted: spool.users, updated: 0,
        sourceLinksChanged: spool.links, method: 'bulk',
      } satisfies ImportSummary;
    });
  } catch (err) {
    if (isUniqueViolation(err)) return { impossible: 'a user_id or client_user_id is not unique' };
    if (err instanceof ScheduledUserInFile) return { impossible: 'a user_id is scheduled for deletion' };
    throw err;
  }
}

/** Thrown out of the bulk load's savepoint: the file brings back a user scheduled for deletion. */
class ScheduledUserInFile extends Error {}

/** Fills the shadow tables, builds their indexes and swaps them in; returns the users per team of the spool. */
async function load(tx: Tx, ctx: ImportContext, users: RebuildPlan, links: RebuildPlan): Promise<number[]> {
  ctx.progress?.('writing', 0);
  await createShadow(tx, users);
  await createShadow(tx, links);
  // One statement, one snapshot: the stored users, their links and the team versions they belong to. (With the
  // links copied by a later statement, a user created in between had its links copied twice at the swap's re-copy.)
  // A data-modifying WITH runs to completion whether or not the main query reads it.
  const versions = await tx<{ team_id: string; version: string }[]>`
    WITH copied AS (INSERT INTO users_bulk SELECT * FROM users),
      linked AS (INSERT INTO user_sources_bulk SELECT * FROM user_sources)
    SELECT team_id, version::text FROM teams`;

  // FREEZE: rows are written already frozen and visible, so no later pass rewrites every page to set hint bits.
  const perTeam = new Array<number>(ctx.spool.teamIds.length).fill(0);
  const userCopy = await tx.unsafe(`COPY users_bulk (position, ${USER_COLUMNS.join(', ')}) FROM STDIN (FORMAT binary, FREEZE)`).writable();
  await writeCopy(userCopy, usersInListOrder(ctx, perTeam));
  ctx.progress?.('writing', ctx.spool.users);
  const linkCopy = await tx`COPY user_sources_bulk (user_id, source_id, created_on) FROM STDIN (FORMAT binary, FREEZE)`.writable();
  await writeCopy(linkCopy, linkTuples(ctx));

  ctx.progress?.('indexing');
  await buildShadowIndexes(tx, users);
  await buildShadowIndexes(tx, links);
  // A user_id scheduled for deletion (in any team) may not come back by import: the merge path's checks name its line.
  // The file's users are the rows of its teams (they had none stored).
  const [scheduled] = await tx`
    SELECT 1 FROM deleted_users d JOIN users_bulk b USING (user_id) WHERE b.team_id = ANY(${ctx.teamIds}::uuid[]) LIMIT 1`;
  if (scheduled) throw new ScheduledUserInFile();
  ctx.progress?.('finishing');
  // Column statistics for the new tables with a tenth of the default sample (0.06 instead of 0.5 s on a million
  // users): plans here are index lookups either way, and autovacuum takes a full sample later.
  await tx`SET LOCAL default_statistics_target = 10`;
  await tx`ANALYZE users_bulk, user_sources_bulk`;
  await tx`RESET default_statistics_target`;

  await tx.unsafe(`SET LOCAL lock_timeout = '${SWAP_LOCK_TIMEOUT}'`);
  // From here until commit nobody else reads or writes these tables (a few milliseconds: creates made
  // meanwhile are copied again, then the swap). Exclusive at once: a share lock first, upgraded for the
  // swap, deadlocks with a create that has read users and waits to insert.
  await tx`LOCK TABLE users, user_sources IN ACCESS EXCLUSIVE MODE`;
  const seen = new Map(versions.map((v) => [v.team_id, v.version]));
  const now = await tx<{ team_id: string; version: string }[]>`SELECT team_id, version::text FROM teams`;
  const moved = now.filter((t) => seen.get(t.team_id) !== t.version).map((t) => t.team_id);
  if (moved.length > 0) {
    await tx`DELETE FROM user_sources_bulk b USING users_bulk u WHERE u.user_id = b.user_id AND u.team_id = ANY(${moved}::uuid[])`;
    await tx`DELETE FROM users_bulk WHERE team_id = ANY(${moved}::uuid[])`;
    await tx`INSERT INTO users_bulk SELECT * FROM users WHERE team_id = ANY(${moved}::uuid[])`;
    await tx`INSERT INTO user_sources_bulk SELECT us.* FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ANY(${moved}::uuid[])`;
  }
  await swapInShadow(tx, users);
  await swapInShadow(tx, links);
  await tx`SET LOCAL lock_timeout = 0`;
  return perTeam;
}

/** The spooled users as COPY tuples in list order, each with its position: the table's rows end up in the order list pages read them. */
function usersInListOrder(ctx: ImportContext, perTeam: number[]): Generator<Buffer> {
  let written = 0;
  return copyTuples(ctx.spool.usersInListOrder(), (out, { team, fields }) => {
    out.tuple(1 + USER_COLUMNS.length);
    out.int8(++perTeam[team]!);
    out.raw(fields);
    if (++written % PROGRESS_EVERY === 0) ctx.progress?.('writing', written);
  });
}

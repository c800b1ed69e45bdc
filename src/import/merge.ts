import type { Tx } from '../db/client.js';
import { copyTuples, writeCopy } from '../db/copy-binary.js';
import { ImportError } from './line.js';
import { linkTuples, PROGRESS_EVERY, type ImportContext, type ImportSummary } from './context.js';
import { columnList, USER_COLUMNS } from '../writes/user-columns.js';
import { connectionsChanged, recountTeamState, usersAppended } from '../writes/team-state.js';
import { rebuildDocumentsOfSources } from '../writes/stored-documents.js';

/**
 * The merge path: the spooled users and links are copied into temporary
 * tables, checked against each other and against what is stored, and
 * merged set-wise: new users inserted, changed ones updated. Positions
 * (migrations/005): a team whose file users are all new and all sort after
 * its stored ones (the usual daily import) gets them appended at its next
 * positions, and no stored row moves; any other team is ranked anew, its
 * users scheduled for deletion included. The teams' state follows
 * (src/writes/team-state.ts).
 */
export async function mergeImport(tx: Tx, ctx: ImportContext): Promise<ImportSummary> {
  await stage(tx, ctx);
  await checkStaged(tx);
  return merge(tx, ctx);
}

/** The connections of live users by team and week: what the file's users had before, and have now. */
function countLinkChanges(tx: Tx): Promise<void> {
  return connectionsChanged(tx, tx`
    SELECT team_id, source_week(created_on) AS week, sum(n)::int AS n FROM (
      SELECT i.team_id, s.created_on, 1 AS n FROM import_sources s JOIN import_users i USING (user_id)
      UNION ALL
      SELECT team_id, created_on, -1 FROM import_old_links
    ) x GROUP BY 1, 2 HAVING sum(n) <> 0`);
}

async function stage(tx: Tx, ctx: ImportContext): Promise<void> {
  // The file's users with their line, in the spool's field order (USER_COLUMNS), typed as the users table.
  await tx`
    CREATE TEMP TABLE import_users ON COMMIT DROP AS
    SELECT 0 AS line, ${columnList(tx, USER_COLUMNS)} FROM users WITH NO DATA`;
  ctx.progress?.('writing', 0);
  await writeCopy(await tx`COPY import_users FROM STDIN (FORMAT binary)`.writable(), stagedUsers(ctx));
  await tx`
    CREATE TEMP TABLE import_sources (user_id uuid NOT NULL, source_id int NOT NULL, created_on timestamptz NOT NULL)
    ON COMMIT DROP`;
  await writeCopy(await tx`COPY import_sources FROM STDIN (FORMAT binary)`.writable(), linkTuples(ctx));
  // Temporary tables get no automatic statistics: without these the planner guesses their sizes.
  await tx`ANALYZE import_users, import_sources`;
  await tx`CREATE TEMP TABLE import_added (team_id uuid NOT NULL, n int NOT NULL) ON COMMIT DROP`;
  ctx.progress?.('merging', ctx.spool.users);
}

function stagedUsers(ctx: ImportContext): Generator<Buffer> {
  let written = 0;
  return copyTuples(ctx.spool.userRecords(), (out, { line, fields }) => {
    out.tuple(1 + USER_COLUMNS.length);
    out.int4(line);
    out.raw(fields);
    if (++written % PROGRESS_EVERY === 0) ctx.progress?.('writing', written);
  });
}

function failAt(rows: { line: number; reason: string }[]): void {
  const [first] = rows;
  if (first) throw new ImportError(first.line, first.reason);
}

/** Problems that involve more than one line, or what is already stored. */
async function checkStaged(tx: Tx): Promise<void> {
  failAt(await tx<{ line: number; reason: string }[]>`
    SELECT max(line) AS line, 'user_id ' || user_id || ' already appears on line ' || min(line) AS reason
    FROM import_users GROUP BY user_id HAVING count(*) > 1 ORDER BY 1 LIMIT 1`);
  failAt(await tx<{ line: number; reason: string }[]>`
    SELECT max(line) AS line, 'client_user_id ' || to_json(client_user_id)::text || ' already appears in this team on line ' || min(line) AS reason
    FROM import_users GROUP BY team_id, client_user_id HAVING count(*) > 1 ORDER BY 1 LIMIT 1`);
  failAt(await tx<{ line: number; reason: string }[]>`
    SELECT i.line, 'user_id ' || i.user_id || ' is scheduled for deletion (DELETE /v2/user/' || i.user_id
      || '); restore it with undo_delete first, or import it after its purge' AS reason
    FROM import_users i JOIN deleted_users d USING (user_id)
    ORDER BY i.line LIMIT 1`);
  failAt(await tx<{ line: number; reason: string }[]>`
    SELECT i.line, 'user_id ' || i.user_id || ' belongs to another team' AS reason
    FROM import_users i JOIN users u ON u.user_id = i.user_id AND u.team_id <> i.team_id
    ORDER BY i.line LIMIT 1`);
  failAt(await tx<{ line: number; reason: string }[]>`
    SELECT i.line, 'client_user_id ' || to_json(i.client_user_id)::text || ' is already used by user ' || u.user_id || ' of this team' AS reason
    FROM import_users i
    JOIN users u ON u.team_id = i.team_id AND u.client_user_id = i.client_user_id AND u.user_id <> i.user_id
    WHERE NOT EXISTS (SELECT 1 FROM import_users o WHERE o.user_id = u.user_id)
    ORDER BY i.line LIMIT 1`);
}

/** What the merge may change in a stored user: all but its id and team. */
const CHANGEABLE = [...USER_COLUMNS.filter((c) => c !== 'user_id' && c !== 'team_id'), 'position'];

async function merge(tx: Tx, ctx: ImportContext): Promise<ImportSummary> {
  const { teamIds } = ctx;
  // Per team: whether the file keeps every stored position: its stored users keep their created_on, and
  // its new users all sort after the team's last stored user (live or scheduled for deletion).
  await tx`
    CREATE TEMP TABLE import_teams ON COMMIT DROP AS
    SELECT t.team_id, t.next_position,
      NOT EXISTS (SELECT 1 FROM import_users i JOIN users u USING (user_id) WHERE i.team_id = t.team_id AND u.created_on <> i.created_on)
      AND NOT EXISTS (
        SELECT 1 FROM (
          (SELECT created_on, user_id FROM users WHERE team_id = t.team_id ORDER BY position DESC LIMIT 1)
          UNION ALL
          (SELECT created_on, user_id FROM deleted_users WHERE team_id = t.team_id ORDER BY position DESC LIMIT 1)
        ) l
        JOIN (
          SELECT DISTINCT ON (team_id) team_id, created_on, user_id FROM import_users i
          WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_id = i.user_id)
          ORDER BY team_id, created_on, user_id
        ) f ON f.team_id = t.team_id
        WHERE (l.created_on, l.user_id) >= (f.created_on, f.user_id)
      ) AS appends
    FROM teams t WHERE t.team_id = ANY(${teamIds}::uuid[])`;
  // Positions: stored ones kept and new users appended after the team's last, or the team's list order
  // over stored (live and scheduled) and incoming users together.
  await tx`
    CREATE TEMP TABLE import_ranked ON COMMIT DROP AS
    SELECT i.user_id, i.team_id, false AS scheduled,
      coalesce(u.position, m.next_position - 1
        + row_number() OVER (PARTITION BY i.team_id, u.position IS NULL ORDER BY i.created_on, i.user_id)) AS position
    FROM import_users i JOIN import_teams m ON m.team_id = i.team_id AND m.appends
    LEFT JOIN users u ON u.user_id = i.user_id
    UNION ALL
    SELECT user_id, team_id, scheduled, row_number() OVER (PARTITION BY team_id ORDER BY created_on, user_id) AS position
    FROM (
      SELECT u.user_id, u.team_id, u.created_on, false AS scheduled FROM users u
      JOIN import_teams m ON m.team_id = u.team_id AND NOT m.appends
      WHERE NOT EXISTS (SELECT 1 FROM import_users i WHERE i.user_id = u.user_id)
      UNION ALL
      SELECT d.user_id, d.team_id, d.created_on, true FROM deleted_users d
      JOIN import_teams m ON m.team_id = d.team_id AND NOT m.appends
      UNION ALL
      SELECT i.user_id, i.team_id, i.created_on, false FROM import_users i
      JOIN import_teams m ON m.team_id = i.team_id AND NOT m.appends
    ) a`;
  await tx`CREATE INDEX ON import_ranked (user_id)`;
  await tx`ANALYZE import_teams, import_ranked`;
  // The file users' links as stored before this import, to count the connections that change.
  await tx`
    CREATE TEMP TABLE import_old_links ON COMMIT DROP AS
    SELECT i.team_id, us.created_on FROM user_sources us JOIN import_users i USING (user_id)`;

  // The unique (team_id, client_user_id) is checked row by row: a file that swaps two stored users' ids,
  // or gives a new user the id a stored one is renamed away from, would trip over a value about to be
  // released. Users whose id changes let go of theirs first, for a placeholder no client_user_id can
  // equal (those refuse control characters), overwritten below in this transaction.
  await tx`
    UPDATE users u SET client_user_id = chr(1) || u.user_id::text
    FROM import_users i
    WHERE i.user_id = u.user_id AND i.client_user_id <> u.client_user_id`;

  const [written] = await tx<{ inserted: number; updated: number; teams: string[] }[]>`
    WITH w AS (
    INSERT INTO users AS u (${columnList(tx, USER_COLUMNS)}, position)
    SELECT ${columnList(tx, USER_COLUMNS, 'i')}, r.position
    FROM import_users i JOIN import_ranked r USING (user_id)
    -- In index order: appends to the (team_id, position) index instead of random inserts.
    ORDER BY i.team_id, r.position
    -- A stored user is written again only where the file changes it; its id and team stay.
    ON CONFLICT (user_id) DO UPDATE SET (${columnList(tx, CHANGEABLE)}) = ROW(${columnList(tx, CHANGEABLE, 'excluded')})
    WHERE (${columnList(tx, CHANGEABLE, 'u')}) IS DISTINCT FROM (${columnList(tx, CHANGEABLE, 'excluded')})
    RETURNING u.team_id, (xmax = 0) AS inserted),
    -- Grouped first: a DISTINCT over every written row would sort them all.
    per_team AS (SELECT team_id, inserted, count(*) AS n FROM w GROUP BY team_id, inserted),
    added AS (
      INSERT INTO import_added (team_id, n) SELECT team_id, n FROM per_team WHERE inserted
    )
    SELECT coalesce(sum(n) FILTER (WHERE inserted), 0)::int AS inserted, coalesce(sum(n) FILTER (WHERE NOT inserted), 0)::int AS updated,
      coalesce(array_agg(DISTINCT team_id), '{}') AS teams
    FROM per_team`;
  // Stored users (live or scheduled for deletion) that the new arrivals pushed down the list.
  const moved = await tx<{ team_id: string }[]>`
    WITH live AS (
      UPDATE users u SET position = r.position
      FROM import_ranked r
      WHERE u.user_id = r.user_id AND NOT r.scheduled AND u.position <> r.position
      RETURNING u.team_id
    ), scheduled AS (
      UPDATE deleted_users d SET position = r.position
      FROM import_ranked r
      WHERE d.user_id = r.user_id AND r.scheduled AND d.position <> r.position
      RETURNING d.team_id
    )
    SELECT team_id FROM live UNION SELECT team_id FROM scheduled`;
  const changedTeams = [...(written?.teams ?? []), ...moved.map((m) => m.team_id)];

  const removed = await tx`
    DELETE FROM user_sources us
    USING import_users i
    WHERE us.user_id = i.user_id
      AND NOT EXISTS (SELECT 1 FROM import_sources s WHERE s.user_id = us.user_id AND s.source_id = us.source_id)`;
  const linked = await tx`
    INSERT INTO user_sources AS us (user_id, source_id, created_on)
    SELECT user_id, source_id, created_on FROM import_sources
    ON CONFLICT (user_id, source_id) DO UPDATE SET created_on = excluded.created_on
    WHERE us.created_on <> excluded.created_on`;

  await rebuildDocumentsOfSources(tx, ctx.renamedSourceIds);

  await countLinkChanges(tx);

  // Fresh statistics, so that the first reads after a large import get index plans.
  await tx`ANALYZE users, user_sources, sources`;
  // Teams that kept their positions got users appended (or none); the others were ranked anew: recounted.
  // A file that changes nothing writes nothing.
  const teams = await tx<{ team_id: string; appends: boolean; added: number }[]>`
    SELECT m.team_id, m.appends, coalesce(a.n, 0) AS added
    FROM import_teams m LEFT JOIN (SELECT team_id, sum(n)::int AS n FROM import_added GROUP BY 1) a USING (team_id)
    WHERE coalesce(a.n, 0) > 0 OR m.team_id = ANY(${changedTeams}::uuid[]) OR NOT m.appends`;
  const appended = teams.filter((t) => t.appends);
  await usersAppended(tx, { teamIds: appended.map((t) => t.team_id), added: appended.map((t) => t.added) });
  await recountTeamState(tx, teams.filter((t) => !t.appends).map((t) => t.team_id));

  return {
    lines: ctx.spool.users,
    teams: ctx.newTeams,
    inserted: written?.inserted ?? 0,
    updated: written?.updated ?? 0,
    sourceLinksChanged: removed.count + linked.count,
    method: 'merge',
  };
}

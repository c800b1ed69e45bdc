import type { Tx } from '../db/client.js';
import { copyTuples, writeCopy } from '../db/copy-binary.js';
import { ImportError } from './import-line.js';
import { linkTuples, rebuildRenamedDocuments, type ImportContext, type ImportSummary } from './import-context.js';
import { USER_COLUMNS, type ImportSpool } from './import-spool.js';

/**
 * The merge path: the spooled users and links are copied into temporary
 * tables, checked against each other and against what is stored, and
 * merged set-wise: new users inserted, changed ones updated, positions of
 * the teams' stored users moved where new users sort before them.
 */
export async function mergeImport(tx: Tx, ctx: ImportContext): Promise<ImportSummary> {
  await stage(tx, ctx);
  await checkStaged(tx);
  return merge(tx, ctx);
}

async function stage(tx: Tx, ctx: ImportContext): Promise<void> {
  await tx`
    CREATE TEMP TABLE import_users (
      line int NOT NULL, user_id uuid NOT NULL, team_id uuid NOT NULL, client_user_id text COLLATE "C" NOT NULL,
      created_on timestamptz NOT NULL,
      tz text, tz_source text, tz_updated_at timestamptz,
      bd date, bd_source text, bd_updated_at timestamptz,
      ingestion_start date, ingestion_end date, doc text NOT NULL
    ) ON COMMIT DROP`;
  await writeCopy(await tx`COPY import_users FROM STDIN (FORMAT binary)`.writable(), stagedUsers(ctx.spool));
  await tx`
    CREATE TEMP TABLE import_sources (user_id uuid NOT NULL, source_id int NOT NULL, created_on timestamptz NOT NULL)
    ON COMMIT DROP`;
  await writeCopy(await tx`COPY import_sources FROM STDIN (FORMAT binary)`.writable(), linkTuples(ctx));
  // Temporary tables get no automatic statistics: without these the planner guesses their sizes.
  await tx`ANALYZE import_users, import_sources`;
}

function stagedUsers(spool: ImportSpool): Generator<Buffer> {
  return copyTuples(spool.userRecords(), (out, { line, fields }) => {
    out.tuple(1 + USER_COLUMNS.length);
    out.int4(line);
    out.raw(fields);
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

async function merge(tx: Tx, ctx: ImportContext): Promise<ImportSummary> {
  const { teamIds } = ctx;
  // The team's list order over stored and incoming users together.
  await tx`
    CREATE TEMP TABLE import_ranked ON COMMIT DROP AS
    SELECT user_id, team_id, row_number() OVER (PARTITION BY team_id ORDER BY created_on, user_id) AS position
    FROM (
      SELECT u.user_id, u.team_id, u.created_on FROM users u
      WHERE u.team_id = ANY(${teamIds}::uuid[])
        AND NOT EXISTS (SELECT 1 FROM import_users i WHERE i.user_id = u.user_id)
      UNION ALL
      SELECT user_id, team_id, created_on FROM import_users
    ) m`;
  await tx`CREATE INDEX ON import_ranked (user_id)`;
  await tx`ANALYZE import_ranked`;

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
    INSERT INTO users AS u (
      user_id, team_id, client_user_id, created_on, position,
      fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at,
      fallback_birth_date, fallback_birth_date_source, fallback_birth_date_updated_at,
      ingestion_start, ingestion_end, doc)
    SELECT i.user_id, i.team_id, i.client_user_id, i.created_on, r.position,
      i.tz, i.tz_source, i.tz_updated_at, i.bd, i.bd_source, i.bd_updated_at, i.ingestion_start, i.ingestion_end, i.doc
    FROM import_users i JOIN import_ranked r USING (user_id)
    -- In index order: appends to the (team_id, position) index instead of random inserts.
    ORDER BY i.team_id, r.position
    ON CONFLICT (user_id) DO UPDATE SET
      client_user_id = excluded.client_user_id, created_on = excluded.created_on, position = excluded.position,
      fallback_time_zone = excluded.fallback_time_zone, fallback_time_zone_source = excluded.fallback_time_zone_source,
      fallback_time_zone_updated_at = excluded.fallback_time_zone_updated_at,
      fallback_birth_date = excluded.fallback_birth_date, fallback_birth_date_source = excluded.fallback_birth_date_source,
      fallback_birth_date_updated_at = excluded.fallback_birth_date_updated_at,
      ingestion_start = excluded.ingestion_start, ingestion_end = excluded.ingestion_end, doc = excluded.doc
    WHERE (u.doc, u.client_user_id, u.created_on, u.position, u.fallback_time_zone, u.fallback_time_zone_source,
           u.fallback_time_zone_updated_at, u.fallback_birth_date, u.fallback_birth_date_source,
           u.fallback_birth_date_updated_at, u.ingestion_start, u.ingestion_end)
      IS DISTINCT FROM
          (excluded.doc, excluded.client_user_id, excluded.created_on, excluded.position, excluded.fallback_time_zone,
           excluded.fallback_time_zone_source, excluded.fallback_time_zone_updated_at, excluded.fallback_birth_date,
           excluded.fallback_birth_date_source, excluded.fallback_birth_date_updated_at, excluded.ingestion_start,
           excluded.ingestion_end)
    RETURNING u.team_id, (xmax = 0) AS inserted)
    SELECT coalesce(sum(n) FILTER (WHERE inserted), 0)::int AS inserted, coalesce(sum(n) FILTER (WHERE NOT inserted), 0)::int AS updated,
      coalesce(array_agg(DISTINCT team_id), '{}') AS teams
    -- Grouped first: a DISTINCT over every written row would sort them all.
    FROM (SELECT team_id, inserted, count(*) AS n FROM w GROUP BY team_id, inserted) g`;
  // Stored users that the new arrivals pushed down the list.
  const moved = await tx<{ team_id: string }[]>`
    WITH m AS (
      UPDATE users u SET position = r.position
      FROM import_ranked r
      WHERE u.user_id = r.user_id AND u.position <> r.position
      RETURNING u.team_id)
    SELECT DISTINCT team_id FROM m`;
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

  await rebuildRenamedDocuments(tx, ctx.renamedSourceIds);

  // Fresh statistics, so that the first reads after a large import get index plans.
  await tx`ANALYZE users, user_sources, sources`;
  // A team whose users changed gets a new version (migrations/003); a file that changes nothing writes nothing.
  await tx`
    UPDATE teams t SET user_count = c.n, version = t.version + 1
    FROM (SELECT team_id, count(*) AS n FROM import_ranked GROUP BY team_id) c
    WHERE t.team_id = c.team_id AND (t.user_count <> c.n OR t.team_id = ANY(${changedTeams}::uuid[]))`;

  return {
    lines: ctx.spool.users,
    teams: ctx.newTeams,
    inserted: written?.inserted ?? 0,
    updated: written?.updated ?? 0,
    sourceLinksChanged: removed.count + linked.count,
    method: 'merge',
  };
}

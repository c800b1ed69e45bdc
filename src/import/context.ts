import type { Tx } from '../db/client.js';
import { copyTuples } from '../db/copy-binary.js';
import type { ImportSpool } from './spool.js';
import { pgDayText } from '../user-document/pg-time.js';

export interface ImportSummary {
  lines: number;
  teams: number;
  /** Users that were not there before. */
  inserted: number;
  /** Existing users whose own stored values changed. */
  updated: number;
  /** Connected-source rows added, changed or removed. */
  sourceLinksChanged: number;
  method: 'bulk' | 'merge';
  /** Why `auto` or `bulk` merged instead, when it did. */
  bulkSkipped?: string;
}

/** What both ways of writing share, prepared in the import's transaction. */
export interface ImportContext {
  spool: ImportSpool;
  /** The file's teams, locked for this transaction (creates in them wait). */
  teamIds: string[];
  /** How many of them this import created. */
  newTeams: number;
  /** source_id of every source the file names, by the spool's source index. */
  sourceIds: number[];
  /** Catalogue sources whose name or logo the file changed. */
  renamedSourceIds: number[];
}

/** Teams and sources of the file: created or updated, and the teams locked. */
export async function prepareImport(tx: Tx, spool: ImportSpool): Promise<ImportContext> {
  const created = await tx`
    INSERT INTO teams (team_id, name)
    SELECT team_id, 'Imported team' FROM unnest(${spool.teamIds}::uuid[]) AS t(team_id)
    ON CONFLICT (team_id) DO NOTHING RETURNING team_id`;
  // Creates in these teams wait for us: their users and positions are about to be written.
  const locked = await tx<{ team_id: string }[]>`
    SELECT team_id FROM teams WHERE team_id = ANY(${spool.teamIds}::uuid[]) ORDER BY team_id FOR UPDATE`;

  // The file's description of a source replaces the catalogue's; stored users of a changed source get new documents.
  const sources = spool.sourceList;
  const changed = await tx<{ source_id: number; existed: boolean }[]>`
    INSERT INTO sources AS c (slug, name, logo)
    SELECT * FROM unnest(${sources.map((s) => s.slug)}::text[], ${sources.map((s) => s.name)}::text[], ${sources.map((s) => s.logo)}::text[])
    ON CONFLICT (slug) DO UPDATE SET name = excluded.name, logo = excluded.logo
    WHERE (c.name, c.logo) IS DISTINCT FROM (excluded.name, excluded.logo)
    RETURNING source_id, (xmax <> 0) AS existed`;
  const ids = await tx<{ slug: string; source_id: number }[]>`
    SELECT slug, source_id FROM sources WHERE slug = ANY(${sources.map((s) => s.slug)}::text[])`;
  const idBySlug = new Map(ids.map((r) => [r.slug, r.source_id]));
  return {
    spool,
    teamIds: locked.map((t) => t.team_id),
    newTeams: created.length,
    sourceIds: sources.map((s) => idBySlug.get(s.slug)!),
    renamedSourceIds: changed.filter((s) => s.existed).map((s) => s.source_id),
  };
}

/**
 * Stored users linked to a renamed source get their documents rebuilt (from
 * the reference definition, user_documents()). They may be in teams the file
 * does not name: their teams' versions move too (migrations/003).
 *
 * Those teams are locked first, as a create locks its team before it touches
 * any user row. Updating their users first would hold user rows while waiting
 * for the team: a create that renumbers its team (a user that does not sort
 * last) then waits for those rows while holding the team, a deadlock that
 * PostgreSQL ends by failing one of the two. Imports never wait for each other
 * here: they run one at a time (the advisory lock in import.ts).
 */
export async function rebuildRenamedDocuments(tx: Tx, renamedSourceIds: number[]): Promise<void> {
  if (renamedSourceIds.length === 0) return;
  await tx`
    SELECT 1 FROM teams WHERE team_id IN (
      SELECT u.team_id FROM users u JOIN user_sources us USING (user_id) WHERE us.source_id = ANY(${renamedSourceIds}::int[]))
    ORDER BY team_id FOR UPDATE`;
  await tx`
    WITH changed AS (
      UPDATE users u SET doc = v.doc
      FROM user_documents() v
      WHERE v.user_id = u.user_id
        AND u.user_id IN (SELECT user_id FROM user_sources WHERE source_id = ANY(${renamedSourceIds}::int[]))
        AND u.doc <> v.doc
      RETURNING u.team_id)
    UPDATE teams SET version = version + 1 WHERE team_id IN (SELECT team_id FROM changed)`;
}

/** The spooled links as COPY tuples (user_id, source_id, created_on), in file order. */
export function linkTuples(ctx: ImportContext): Generator<Buffer> {
  return copyTuples(ctx.spool.linkRecords(), (out, record) => {
    out.tuple(3);
    out.raw(record, 0, 20);
    out.int4(ctx.sourceIds[record.readUInt16BE(20)]!);
    out.raw(record, 22, 34);
  });
}

/** The file's links per team (in the spool's team order) and per team and week, as columns for unnest. */
export function linkCounts(spool: ImportSpool): { perTeam: number[]; weeks: { teamIds: string[]; weeks: string[]; counts: number[] } } {
  const perTeam = new Array<number>(spool.teamIds.length).fill(0);
  const weeks = { teamIds: [] as string[], weeks: [] as string[], counts: [] as number[] };
  for (const [team, byWeek] of spool.linkWeeks) {
    for (const [week, count] of byWeek) {
      perTeam[team]! += count;
      weeks.teamIds.push(spool.teamIds[team]!);
      weeks.weeks.push(pgDayText(week));
      weeks.counts.push(count);
    }
  }
  return { perTeam, weeks };
}

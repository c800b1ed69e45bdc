import type { Tx } from '../db/client.js';
import { copyTuples } from '../db/copy-binary.js';
import type { ImportSpool } from './spool.js';
import { pgDayText } from '../user-document/pg-time.js';
import { createMissingTeams } from '../teams/team-store.js';
import { lockTeams } from '../writes/team-state.js';

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
  /** Where the writing is (src/import/import.ts: ImportStep), for a progress line. */
  progress?: (step: 'writing' | 'indexing' | 'merging' | 'finishing', written?: number) => void;
}

/** Users between two progress reports while they are written. */
export const PROGRESS_EVERY = 1 << 15;

/** Teams and sources of the file: created or updated, and the teams locked. */
export async function prepareImport(tx: Tx, spool: ImportSpool): Promise<ImportContext> {
  const newTeams = await createMissingTeams(tx, spool.teamIds, 'Imported team');
  // Creates in these teams wait for us: their users and positions are about to be written.
  const teamIds = await lockTeams(tx, spool.teamIds);

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
    teamIds,
    newTeams,
    sourceIds: sources.map((s) => idBySlug.get(s.slug)!),
    renamedSourceIds: changed.filter((s) => s.existed).map((s) => s.source_id),
  };
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

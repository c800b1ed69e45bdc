import type { Writable } from 'node:stream';
import { Type, type Static } from '@sinclair/typebox';
import type { Sql, Tx } from '../db/client.js';
import { makeAjv } from '../http/validator.js';
import { pgTimestamp, userDocument } from './document.js';

const SourceIn = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  slug: Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9_]+$' }),
  logo: Type.String({ maxLength: 2000 }),
}, { additionalProperties: false });
// Only the type here: every date-time goes through pgTimestamp() in stageLine, which checks the
// value in full (RFC 3339, a real day, microseconds at most) while converting it; a second check by
// Ajv's date-time format cost a tenth of the per-line time.
const DateTime = Type.String({ maxLength: 64 });
const DateOnly = Type.String({ format: 'date' });
const Setter = Type.String({ minLength: 1, maxLength: 100 });

/** One line of an import file: the API's User object (`provider`, the deprecated copy of `source`, may be present). */
const ImportLine = Type.Object({
  user_id: Type.String({ format: 'uuid' }),
  team_id: Type.String({ format: 'uuid' }),
  client_user_id: Type.String({ minLength: 1, maxLength: 255, format: 'client-user-id' }),
  created_on: DateTime,
  connected_sources: Type.Array(Type.Object({
    created_on: DateTime,
    source: SourceIn,
    provider: Type.Optional(SourceIn),
  }, { additionalProperties: false }), { maxItems: 100 }),
  fallback_time_zone: Type.Union([Type.Null(), Type.Object({ id: Type.String({ format: 'time-zone' }), source_slug: Setter, updated_at: DateTime }, { additionalProperties: false })]),
  fallback_birth_date: Type.Optional(Type.Union([Type.Null(), Type.Object({ value: Type.String({ format: 'past-date' }), source_slug: Setter, updated_at: DateTime }, { additionalProperties: false })])),
  ingestion_start: Type.Optional(Type.Union([Type.Null(), DateOnly])),
  ingestion_end: Type.Optional(Type.Union([Type.Null(), DateOnly])),
}, { additionalProperties: false });
type ImportLine = Static<typeof ImportLine>;

// First error only, no coercion, no defaults: a line is refused as written.
const ajv = makeAjv({ allErrors: false, verbose: false, useDefaults: false, coerceTypes: false });
const validateLine = ajv.compile<ImportLine>(ImportLine);

export class ImportError extends Error {
  constructor(readonly line: number, readonly reason: string) {
    super(`line ${line}: ${reason}`);
  }
}

export interface ImportProgress {
  lines: number;
  bytes: number;
}

export interface ImportSummary {
  lines: number;
  teams: number;
  /** Users that were not there before. */
  inserted: number;
  /** Existing users whose own stored values changed. */
  updated: number;
  /** Connected-source rows added, changed or removed. */
  sourceLinksChanged: number;
}

/** Checks one line and returns the tab-separated COPY row for the staging table. */
export function stageLine(text: string, lineNo: number): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ImportError(lineNo, `not valid JSON (${(err as Error).message})`);
  }
  if (!validateLine(value)) {
    const e = validateLine.errors?.[0];
    const where = e?.instancePath ? e.instancePath.slice(1).replace(/\//g, '.') : 'the object';
    const what = e?.keyword === 'additionalProperties' ? `unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"` : e?.message;
    throw new ImportError(lineNo, `${where}: ${what}`);
  }
  const u = value;
  const time = (field: string, v: string): string => {
    const t = pgTimestamp(v);
    if (t === null) throw new ImportError(lineNo, `${field}: ${JSON.stringify(v)} is not an RFC 3339 date-time that PostgreSQL stores exactly (a real date and time, at most microseconds, years 1000-9999)`);
    return t;
  };
  const slugs = new Set<string>();
  const links = u.connected_sources.map((cs, i) => {
    if (slugs.has(cs.source.slug)) throw new ImportError(lineNo, `connected_sources: source "${cs.source.slug}" appears twice`);
    slugs.add(cs.source.slug);
    return { created_on: time(`connected_sources.${i}.created_on`, cs.created_on), source: cs.source };
  });
  if (u.ingestion_start && u.ingestion_end && u.ingestion_start > u.ingestion_end) {
    throw new ImportError(lineNo, 'ingestion_start is after ingestion_end');
  }
  const tz = u.fallback_time_zone && { ...u.fallback_time_zone, updated_at: time('fallback_time_zone.updated_at', u.fallback_time_zone.updated_at) };
  const bd = u.fallback_birth_date ? { ...u.fallback_birth_date, updated_at: time('fallback_birth_date.updated_at', u.fallback_birth_date.updated_at) } : null;
  const user = {
    user_id: u.user_id.toLowerCase(), team_id: u.team_id.toLowerCase(), client_user_id: u.client_user_id,
    created_on: time('created_on', u.created_on), connected_sources: links,
    fallback_time_zone: tz, fallback_birth_date: bd,
    ingestion_start: u.ingestion_start ?? null, ingestion_end: u.ingestion_end ?? null,
  };
  const sources = JSON.stringify(links.map((cs) => [cs.source.slug, cs.source.name, cs.source.logo, cs.created_on]));
  return [
    String(lineNo), user.user_id, user.team_id, copyField(user.client_user_id), user.created_on,
    copyField(tz?.id ?? null), copyField(tz?.source_slug ?? null), copyField(tz?.updated_at ?? null),
    copyField(bd?.value ?? null), copyField(bd?.source_slug ?? null), copyField(bd?.updated_at ?? null),
    copyField(user.ingestion_start), copyField(user.ingestion_end), copyField(sources), copyField(userDocument(user)),
  ].join('\t') + '\n';
}

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A value in PostgreSQL's COPY text format. */
function copyField(v: string | null): string {
  if (v === null) return '\\N';
  return COPY_SPECIAL.test(v) ? v.replace(/[\\\t\n\r]/g, (c) => COPY_ESCAPES[c]!) : v;
}

function write(stream: Writable, chunk: string): Promise<void> | undefined {
  if (stream.write(chunk)) return undefined;
  return new Promise((resolve, reject) => {
    const onDrain = () => { stream.off('error', onError); resolve(); };
    const onError = (err: Error) => { stream.off('drain', onDrain); reject(err); };
    stream.once('drain', onDrain);
    stream.once('error', onError);
  });
}

/**
 * Imports users in one transaction: every line is checked and streamed into a
 * staging table with COPY (nothing is held in memory), then merged set-wise.
 * Any bad line aborts the whole import with its line number. Importing the
 * same data again changes no row.
 */
export async function importUsers(
  sql: Sql,
  lines: AsyncIterable<string>,
  onProgress?: (p: ImportProgress) => void,
): Promise<ImportSummary> {
  return sql.begin(async (tx) => {
    // A bulk load is not a request: no request-sized statement timeout, more memory for the merge sorts.
    await tx`SET LOCAL statement_timeout = 0`;
    await tx`SET LOCAL work_mem = '256MB'`;
    await tx`
      CREATE TEMP TABLE import_users (
        line int NOT NULL, user_id uuid NOT NULL, team_id uuid NOT NULL, client_user_id text NOT NULL,
        created_on timestamptz NOT NULL,
        tz text, tz_source text, tz_updated_at timestamptz,
        bd date, bd_source text, bd_updated_at timestamptz,
        ingestion_start date, ingestion_end date, sources json NOT NULL, doc text NOT NULL
      ) ON COMMIT DROP`;

    const copy = await tx`COPY import_users FROM STDIN`.writable();
    // Without a listener, an error PostgreSQL raises mid-COPY would crash the process instead of failing the import.
    let copyError: Error | undefined;
    copy.on('error', (err: Error) => { copyError ??= err; });
    const progress: ImportProgress = { lines: 0, bytes: 0 };
    let lineNo = 0;
    let batch = '';
    try {
      for await (const text of lines) {
        lineNo++;
        progress.bytes += Buffer.byteLength(text) + 1;
        if (text.trim() === '') continue;
        batch += stageLine(text, lineNo);
        progress.lines++;
        if (batch.length > 1 << 16) {
          if (copyError) throw copyError;
          await write(copy, batch);
          batch = '';
          onProgress?.(progress);
        }
      }
      if (batch) await write(copy, batch);
    } catch (err) {
      copy.destroy();
      throw err;
    }
    await new Promise<void>((resolve, reject) => copy.end((err?: Error | null) => (err ? reject(err) : resolve())));
    if (copyError) throw copyError;
    onProgress?.(progress);
    if (progress.lines === 0) return { lines: 0, teams: 0, inserted: 0, updated: 0, sourceLinksChanged: 0 };

    await expandSources(tx);
    await checkStaged(tx);
    return merge(tx, progress.lines);
  });
}


function failAt(rows: { line: number; reason: string }[]): void {
  const [first] = rows;
  if (first) throw new ImportError(first.line, first.reason);
}

/**
 * The file's connected sources as rows, expanded from JSON once, and each
 * description of a source once (a hash aggregate down to a few rows, so the
 * source checks and the catalogue upsert sort no large set).
 */
async function expandSources(tx: Tx): Promise<void> {
  await tx`
    CREATE TEMP TABLE import_sources ON COMMIT DROP AS
    SELECT i.user_id, e->>0 AS slug, e->>1 AS name, e->>2 AS logo, (e->>3)::timestamptz AS created_on, i.line
    FROM import_users i, json_array_elements(i.sources) e`;
  await tx`
    CREATE TEMP TABLE import_source_versions ON COMMIT DROP AS
    SELECT slug, name, logo, min(line) AS line FROM import_sources GROUP BY slug, name, logo`;
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
    SELECT max(line) AS line, 'source ' || to_json(slug)::text || ' has another name or logo on line ' || min(line) AS reason
    FROM import_source_versions
    GROUP BY slug HAVING count(*) > 1 ORDER BY 1 LIMIT 1`);
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

async function merge(tx: Tx, lines: number): Promise<ImportSummary> {
  const teams = await tx<{ team_id: string }[]>`
    INSERT INTO teams (team_id, name)
    SELECT DISTINCT team_id, 'Imported team' FROM import_users
    ON CONFLICT (team_id) DO NOTHING RETURNING team_id`;
  // Creates in these teams wait for us: positions are about to be rewritten.
  const affected = await tx<{ team_id: string }[]>`
    SELECT team_id FROM teams WHERE team_id IN (SELECT DISTINCT team_id FROM import_users)
    ORDER BY team_id FOR UPDATE`;
  const teamIds = affected.map((t) => t.team_id);

  // The file's description of a source replaces the catalogue's; stored users of a changed source get new documents below.
  const upserted = await tx<{ source_id: number; existed: boolean }[]>`
    INSERT INTO sources AS c (slug, name, logo)
    SELECT slug, name, logo FROM import_source_versions
    ON CONFLICT (slug) DO UPDATE SET name = excluded.name, logo = excluded.logo
    WHERE (c.name, c.logo) IS DISTINCT FROM (excluded.name, excluded.logo)
    RETURNING source_id, (xmax <> 0) AS existed`;
  const renamed = upserted.filter((s) => s.existed);

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
      AND NOT EXISTS (
        SELECT 1 FROM import_sources s JOIN sources c ON c.slug = s.slug
        WHERE s.user_id = us.user_id AND c.source_id = us.source_id)`;
  const linked = await tx`
    INSERT INTO user_sources AS us (user_id, source_id, created_on)
    SELECT s.user_id, c.source_id, s.created_on FROM import_sources s JOIN sources c ON c.slug = s.slug
    ON CONFLICT (user_id, source_id) DO UPDATE SET created_on = excluded.created_on
    WHERE us.created_on <> excluded.created_on`;

  if (renamed.length > 0) {
    // These users may be in teams the file does not name: their teams' versions move too (migrations/003).
    await tx`
      WITH changed AS (
        UPDATE users u SET doc = v.doc
        FROM user_documents v
        WHERE v.user_id = u.user_id
          AND u.user_id IN (SELECT user_id FROM user_sources WHERE source_id = ANY(${renamed.map((r) => r.source_id)}::int[]))
          AND u.doc <> v.doc
        RETURNING u.team_id)
      UPDATE teams SET version = version + 1 WHERE team_id IN (SELECT team_id FROM changed)`;
  }

  // Fresh statistics, so that the first reads after a large import get index plans.
  await tx`ANALYZE users, user_sources, sources`;
  // A team whose users changed gets a new version (migrations/003); a file that changes nothing writes nothing.
  await tx`
    UPDATE teams t SET user_count = c.n, version = t.version + 1
    FROM (SELECT team_id, count(*) AS n FROM import_ranked GROUP BY team_id) c
    WHERE t.team_id = c.team_id AND (t.user_count <> c.n OR t.team_id = ANY(${changedTeams}::uuid[]))`;

  return {
    lines,
    teams: teams.length,
    inserted: written?.inserted ?? 0,
    updated: written?.updated ?? 0,
    sourceLinksChanged: removed.count + linked.count,
  };
}

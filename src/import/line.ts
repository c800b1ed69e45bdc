import { Type, type Static } from '@sinclair/typebox';
import { makeAjv } from '../validation/ajv.js';
import type { SourceRef, UserDocInput } from '../user-document/document.js';
import { comparePgTimes, parsePgTime, type PgTime } from '../user-document/pg-time.js';
import { isStorableText } from '../user-document/rules.js';

const SourceIn = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  slug: Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9_]+$' }),
  logo: Type.String({ maxLength: 2000 }),
}, { additionalProperties: false });
// Only the type here: every date-time goes through parsePgTime() in parseImportLine, which checks the
// value in full (RFC 3339, a real day, microseconds at most) while converting it; a second check by
// Ajv's date-time format cost a tenth of the per-line time.
const DateTime = Type.String({ maxLength: 64 });
const DateOnly = Type.String({ format: 'date' });
const Setter = Type.String({ minLength: 1, maxLength: 100 });
// The project's `uuid` format is the canonical form only (isUuid in src/user-document/rules.ts), 36 characters.
const Uuid = Type.String({ format: 'uuid' });

/** One line of an import file: the API's User object (`provider`, the deprecated copy of `source`, may be present). */
const ImportLine = Type.Object({
  user_id: Uuid,
  team_id: Uuid,
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

/** A checked line, every value in the form it is stored in (ids lower-case, date-times as PostgreSQL keeps them). */
export type ImportedUser = UserDocInput<PgTime>;


function byContractOrder(a: { created_on: PgTime; source: SourceRef }, b: { created_on: PgTime; source: SourceRef }): number {
  return comparePgTimes(a.created_on, b.created_on) || (a.source.slug < b.source.slug ? -1 : a.source.slug > b.source.slug ? 1 : 0);
}

/**
 * Checks one line and returns the user it describes (userDocument builds its
 * stored document from this); throws ImportError naming the line and the
 * reason.
 */
export function parseImportLine(text: string, lineNo: number): ImportedUser {
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
  const time = (field: string, v: string): PgTime => {
    const t = parsePgTime(v);
    if (t === null) throw new ImportError(lineNo, `${field}: ${JSON.stringify(v)} is not an RFC 3339 date-time that PostgreSQL stores exactly (a real date and time, at most microseconds, years 1000-9999)`);
    return t;
  };
  const storable = (field: string, v: string): string => {
    if (!isStorableText(v)) throw new ImportError(lineNo, `${field}: contains a NUL character or an unpaired UTF-16 surrogate`);
    return v;
  };
  const sources: ImportedUser['connected_sources'] = [];
  let ordered = true;
  for (let i = 0; i < u.connected_sources.length; i++) {
    const { created_on, source: s } = u.connected_sources[i]!;
    storable(`connected_sources.${i}.source.name`, s.name);
    storable(`connected_sources.${i}.source.logo`, s.logo);
    for (const earlier of sources) {
      if (earlier.source.slug === s.slug) throw new ImportError(lineNo, `connected_sources: source "${s.slug}" appears twice`);
    }
    const link = { created_on: time(`connected_sources.${i}.created_on`, created_on), source: { name: s.name, slug: s.slug, logo: s.logo } };
    if (i > 0 && byContractOrder(sources[i - 1]!, link) > 0) ordered = false;
    sources.push(link);
  }
  if (!ordered) sources.sort(byContractOrder);
  if (u.ingestion_start && u.ingestion_end && u.ingestion_start > u.ingestion_end) {
    throw new ImportError(lineNo, 'ingestion_start is after ingestion_end');
  }
  const tz = u.fallback_time_zone;
  const bd = u.fallback_birth_date;
  return {
    user_id: u.user_id.toLowerCase(),
    team_id: u.team_id.toLowerCase(),
    client_user_id: u.client_user_id,
    created_on: time('created_on', u.created_on),
    connected_sources: sources,
    fallback_time_zone: tz ? { id: tz.id, source_slug: storable('fallback_time_zone.source_slug', tz.source_slug), updated_at: time('fallback_time_zone.updated_at', tz.updated_at) } : null,
    fallback_birth_date: bd ? { value: bd.value, source_slug: storable('fallback_birth_date.source_slug', bd.source_slug), updated_at: time('fallback_birth_date.updated_at', bd.updated_at) } : null,
    ingestion_start: u.ingestion_start ?? null,
    ingestion_end: u.ingestion_end ?? null,
  };
}

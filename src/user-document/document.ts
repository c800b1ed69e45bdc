/**
 * The API's User object as JSON text, built once when a user is written and
 * stored in users.doc, so that reads send stored bytes. The one builder of
 * it: writers build from what they write, src/writes/stored-documents.ts
 * from what is stored (a renamed source, `hds check`).
 */

import { setNewest } from '../bounded-map.js';

export interface SourceRef { name: string; slug: string; logo: string }

/** A date-time already in PostgreSQL's output form: the text itself, or a PgTime (src/user-document/pg-time.ts). */
export type DocTime = string | { text: string };

/** What a document is built from; the import's checked lines carry their date-times as PgTime. */
export interface UserDocInput<Time extends DocTime = DocTime> {
  user_id: string;
  team_id: string;
  client_user_id: string;
  created_on: Time;
  /** In the contract's order: connection time, then slug. */
  connected_sources: { created_on: Time; source: SourceRef }[];
  fallback_time_zone: { id: string; source_slug: string; updated_at: Time } | null;
  fallback_birth_date: { value: string; source_slug: string; updated_at: Time } | null;
  ingestion_start: string | null;
  ingestion_end: string | null;
}

const text = (t: DocTime) => (typeof t === 'string' ? t : t.text);

const q = JSON.stringify;

/**
 * `{"name":…,"slug":…,"logo":…}` of recently seen sources: an import writes the same few sources millions of times.
 * Only checked sources reach it (the catalogue's, or an import line's within its lengths), by slug, the newest kept.
 */
const sourceJsonCache = new Map<string, { name: string; logo: string; json: string }>();
const SOURCES_KEPT = 1000;

function sourceJson(s: SourceRef): string {
  const known = sourceJsonCache.get(s.slug);
  if (known && known.name === s.name && known.logo === s.logo) return known.json;
  const json = `{"name":${q(s.name)},"slug":${q(s.slug)},"logo":${q(s.logo)}}`;
  setNewest(sourceJsonCache, s.slug, { name: s.name, logo: s.logo, json }, SOURCES_KEPT);
  return json;
}

/**
 * The document as JSON text, written piece by piece in the contract's key
 * order: the same bytes JSON.stringify gives for the equivalent object,
 * without building that object first. Free text (client_user_id, source
 * descriptions, setters) goes through JSON.stringify; ids, date-times, dates,
 * zone ids and slugs are already checked to need no escaping.
 * `connected_sources` must already be in the contract's order (connection
 * time, then slug).
 */
export function userDocument(u: UserDocInput): string {
  let sources = '';
  for (const cs of u.connected_sources) {
    const source = sourceJson(cs.source);
    sources += `${sources === '' ? '' : ','}{"created_on":"${text(cs.created_on)}","source":${source},"provider":${source}}`;
  }
  const tz = u.fallback_time_zone;
  const bd = u.fallback_birth_date;
  return `{"user_id":"${u.user_id}","team_id":"${u.team_id}","client_user_id":${q(u.client_user_id)},"created_on":"${text(u.created_on)}"`
    + `,"connected_sources":[${sources}]`
    + `,"fallback_time_zone":${tz ? `{"id":"${tz.id}","source_slug":${q(tz.source_slug)},"updated_at":"${text(tz.updated_at)}"}` : 'null'}`
    + `,"fallback_birth_date":${bd ? `{"value":"${bd.value}","source_slug":${q(bd.source_slug)},"updated_at":"${text(bd.updated_at)}"}` : 'null'}`
    + `,"ingestion_start":${u.ingestion_start === null ? 'null' : `"${u.ingestion_start}"`}`
    + `,"ingestion_end":${u.ingestion_end === null ? 'null' : `"${u.ingestion_end}"`}}`;
}

/**
 * A stored document back as what it was built from, to build it again with
 * a change (a field patched, a source removed). Its date-times are kept as
 * the text PostgreSQL wrote, so the rebuilt document differs from the stored
 * one only where the change is.
 */
export function parseUserDocument(doc: string): UserDocInput<string> {
  const u = JSON.parse(doc) as UserDocInput<string> & { connected_sources: { created_on: string; source: SourceRef; provider?: SourceRef }[] };
  return {
    user_id: u.user_id,
    team_id: u.team_id,
    client_user_id: u.client_user_id,
    created_on: u.created_on,
    connected_sources: u.connected_sources.map(({ created_on, source }) => ({ created_on, source })),
    fallback_time_zone: u.fallback_time_zone,
    fallback_birth_date: u.fallback_birth_date,
    ingestion_start: u.ingestion_start,
    ingestion_end: u.ingestion_end,
  };
}

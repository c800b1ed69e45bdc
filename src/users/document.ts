/**
 * The API's User object as JSON text, built once when a user is written and
 * stored in users.doc, so that reads send stored bytes. The reference
 * definition is the SQL view `user_documents` (migrations/001_init.sql);
 * test/documents.test.ts checks that both produce identical text.
 */

export interface SourceRef { name: string; slug: string; logo: string }

export interface UserDocInput {
  user_id: string;
  team_id: string;
  client_user_id: string;
  /** Date-times must already be in PostgreSQL's output form (see pgTimestamp). */
  created_on: string;
  connected_sources: { created_on: string; source: SourceRef }[];
  fallback_time_zone: { id: string; source_slug: string; updated_at: string } | null;
  fallback_birth_date: { value: string; source_slug: string; updated_at: string } | null;
  ingestion_start: string | null;
  ingestion_end: string | null;
}

/** Sources in the contract's order: connection time, then slug. Times are in pgTimestamp form, so they compare as text. */
function contractOrder(a: { created_on: string; source: SourceRef }, b: { created_on: string; source: SourceRef }): number {
  const ta = timeKey(a.created_on), tb = timeKey(b.created_on);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.source.slug < b.source.slug ? -1 : a.source.slug > b.source.slug ? 1 : 0;
}

// "2024-05-06T21:42:09.22+00:00" -> "2024-05-06T21:42:09.220000": fixed width, so text order is time order.
function timeKey(t: string): string {
  const [whole, frac = ''] = t.slice(0, -6).split('.');
  return `${whole}.${frac.padEnd(6, '0')}`;
}

export function userDocument(u: UserDocInput): string {
  const sources = [...u.connected_sources].sort(contractOrder).map((cs) => {
    const source = { name: cs.source.name, slug: cs.source.slug, logo: cs.source.logo };
    return { created_on: cs.created_on, source, provider: source };
  });
  const tz = u.fallback_time_zone;
  const bd = u.fallback_birth_date;
  return JSON.stringify({
    user_id: u.user_id,
    team_id: u.team_id,
    client_user_id: u.client_user_id,
    created_on: u.created_on,
    connected_sources: sources,
    fallback_time_zone: tz ? { id: tz.id, source_slug: tz.source_slug, updated_at: tz.updated_at } : null,
    fallback_birth_date: bd ? { value: bd.value, source_slug: bd.source_slug, updated_at: bd.updated_at } : null,
    ingestion_start: u.ingestion_start,
    ingestion_end: u.ingestion_end,
  });
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isDayOfMonth(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!);
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$/;

/**
 * An RFC 3339 date-time as PostgreSQL writes the stored timestamptz in a UTC
 * session: "YYYY-MM-DDTHH:MM:SS[.fraction]+00:00", the fraction without
 * trailing zeros. Returns null for values PostgreSQL would store differently
 * than written (more than microsecond precision, leap seconds, years outside
 * 1000-9999), which the import refuses rather than silently rounding, and
 * for impossible ones (February 30th, hour 24).
 */
export function pgTimestamp(value: string): string | null {
  const m = RFC3339.exec(value);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac = '', zone] = m;
  if (frac.length > 6 || s! > '59' || mi! > '59' || h! > '23' || !isDayOfMonth(Number(y), Number(mo), Number(d))) return null;
  const fraction = frac.replace(/0+$/, '');
  // Already UTC (what exports and most sources write): the fields are PostgreSQL's as they stand,
  // no Date round trip (this function was a fifth of an import's per-line time).
  if (zone === 'Z' || zone === 'z' || zone === '+00:00' || zone === '-00:00') {
    if (y! < '1000') return null;
    return `${y}-${mo}-${d}T${h}:${mi}:${s}${fraction ? '.' + fraction : ''}+00:00`;
  }
  const offsetMin = (Number(zone!.slice(1, 3)) * 60 + Number(zone!.slice(4, 6))) * (zone![0] === '-' ? -1 : 1);
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) - offsetMin * 60_000;
  const iso = new Date(ms).toISOString();
  if (!/^\d{4}-/.test(iso) || iso < '1000') return null;
  return `${iso.slice(0, 19)}${fraction ? '.' + fraction : ''}+00:00`;
}

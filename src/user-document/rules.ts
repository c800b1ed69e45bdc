/** Value rules for user fields that JSON Schema alone can't express. */
import { isDayOfMonth } from './pg-time.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A UUID in the canonical form only, as PostgreSQL reads it (either case).
 * ajv-formats' `uuid` also takes a `urn:uuid:` prefix, which PostgreSQL
 * refuses, and an id that fails there fails every lookup batched with it
 * (src/db/turn-batcher.ts).
 */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

const ZONE_SHAPE = /^[A-Z][A-Za-z0-9_+-]*(\/[A-Z][A-Za-z0-9_+-]*)*$/;

// Building an Intl.DateTimeFormat costs tens of microseconds; an import checks millions of zones from a set of a few hundred.
const zoneVerdicts = new Map<string, boolean>();

/** An IANA zone id in its canonical spelling (`Area/Location`, or an alias such as `UTC`). */
export function isTimeZone(value: string): boolean {
  const known = zoneVerdicts.get(value);
  if (known !== undefined) return known;
  let valid = ZONE_SHAPE.test(value) && value.length <= 64;
  if (valid) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: value });
    } catch {
      valid = false;
    }
  }
  if (zoneVerdicts.size < 10_000) zoneVerdicts.set(value, valid);
  return valid;
}

const DATE_SHAPE = /^(\d{4})-(\d{2})-(\d{2})$/;

// Arithmetic, not a Date round trip: the import checks millions of these (a Date and its ISO string
// per value were an eighth of the import's time per line).
export function isCalendarDate(value: string): boolean {
  const m = DATE_SHAPE.exec(value);
  // Years below 100 stay refused, as they were when this went through Date.UTC (which reads them as 19xx).
  return m !== null && Number(m[1]) >= 100 && isDayOfMonth(Number(m[1]), Number(m[2]), Number(m[3]));
}

let latestToday = { until: 0, date: '' };

/** A real calendar date that is not after today (UTC+14, the earliest "today" anywhere). */
export function isPastDate(value: string): boolean {
  if (!isCalendarDate(value)) return false;
  const now = Date.now();
  // Recomputed once a second rather than per value.
  if (now >= latestToday.until) latestToday = { until: now + 1000, date: new Date(now + 14 * 3600_000).toISOString().slice(0, 10) };
  return value <= latestToday.date;
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const PHONE = /^\+?[\d\s().-]+$/;

/** No control characters, and nothing that looks like an e-mail address or phone number (personal data). */
export function isClientUserId(value: string): boolean {
  if (CONTROL.test(value) || !isStorableText(value)) return false;
  if (EMAIL.test(value)) return false;
  if (PHONE.test(value)) {
    // Bare digit strings stay allowed: they are how many teams number their own users.
    const digits = value.replace(/\D/g, '').length;
    const formatted = value.startsWith('+') || /[\s().-]/.test(value);
    if (formatted && digits >= 7 && digits <= 15) return false;
  }
  return true;
}

/**
 * Text PostgreSQL can store as written: no NUL (which text columns refuse,
 * SQLSTATE 22021) and no lone UTF-16 surrogate (which UTF-8 encoding would
 * silently turn into U+FFFD, so that what is stored differs from what was sent).
 */
export function isStorableText(value: string): boolean {
  return !value.includes('\0') && value.isWellFormed();
}

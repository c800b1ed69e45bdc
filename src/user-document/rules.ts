/** Value rules for user fields that JSON Schema alone can't express. */
import { setNewest } from '../bounded-map.js';
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
const LONGEST_ZONE = 64;

// Building an Intl.DateTimeFormat costs tens of microseconds; an import checks millions of zones from a set of a few hundred.
// Keyed only by values of a zone's shape (at most 64 characters), newest kept: refused junk is never held, and a
// flood of well-shaped unknown zones cannot keep the valid ones out.
const zoneVerdicts = new Map<string, boolean>();
const ZONES_KEPT = 10_000;

/** An IANA zone id in its canonical spelling (`Area/Location`, or an alias such as `UTC`). */
export function isTimeZone(value: string): boolean {
  if (value.length > LONGEST_ZONE || !ZONE_SHAPE.test(value)) return false;
  const known = zoneVerdicts.get(value);
  if (known !== undefined) return known;
  let valid = true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
  } catch {
    valid = false;
  }
  setNewest(zoneVerdicts, value, valid, ZONES_KEPT);
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
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
const URI_SCHEME = /^(?:tel|mailto|sms|callto):/i;
// `local@domain`, the domain without a dot (user@localhost) and the @ repeated (user@@example.com) included.
const EMAIL = /^[^\s@]+(?:@+[^\s@]+)+$/;
// An extension at the end: "x1", "ext. 12", "extension 3", "#4". Every quantifier but the digits' is bounded
// before the marker, so that 16 KB of punctuation costs one pass, not one per position.
const EXTENSION = /(?:x|ext\.?|extension|#)[\s\p{P}]{0,3}\p{Nd}{1,6}$/iu;
// Digits with nothing but separators between them: spaces, punctuation (. - _ / ( ) and the like), invisible formatting, +.
const DIGITS_AND_SEPARATORS = /^[\p{Nd}\p{P}\p{Zs}\p{Cf}\s+]+$/u;
const SEPARATOR = /[^\p{Nd}]/u;
const DIGIT = /\p{Nd}/gu;

/** No control characters, and nothing that looks like an e-mail address or phone number (personal data). */
export function isClientUserId(value: string): boolean {
  return !CONTROL.test(value) && isStorableText(value) && !looksLikeContact(value);
}

/**
 * Whether `value`, written in any of the usual ways, is an e-mail address or
 * a phone number. Judged on a normal form, so that the rule is not stepped
 * around: full-width forms folded (＠, １), blanks around it trimmed, a
 * tel:/mailto: scheme dropped, any run of separators taken as one.
 */
function looksLikeContact(value: string): boolean {
  // NFKC leaves printable ASCII as it is: most ids skip it (the import judges millions).
  let text = (PRINTABLE_ASCII.test(value) ? value : value.normalize('NFKC')).trim();
  const scheme = URI_SCHEME.exec(text);
  if (scheme) text = text.slice(scheme[0].length).trim();
  if (EMAIL.test(text)) return true;
  const number = text.replace(EXTENSION, '');
  if (!DIGITS_AND_SEPARATORS.test(number)) return false;
  const digits = number.match(DIGIT)?.length ?? 0;
  // Bare digit strings stay allowed: they are how many teams number their own users. A scheme,
  // an extension, a + or a separator makes them a formatted phone number.
  const formatted = scheme !== null || number !== text || SEPARATOR.test(number);
  return formatted && digits >= 7 && digits <= 15;
}

/**
 * Text PostgreSQL can store as written: no NUL (which text columns refuse,
 * SQLSTATE 22021) and no lone UTF-16 surrogate (which UTF-8 encoding would
 * silently turn into U+FFFD, so that what is stored differs from what was sent).
 */
export function isStorableText(value: string): boolean {
  return !value.includes('\0') && value.isWellFormed();
}

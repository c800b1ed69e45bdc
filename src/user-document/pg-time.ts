/**
 * A date-time as PostgreSQL stores a timestamptz: its text in a UTC session
 * ("YYYY-MM-DDTHH:MM:SS[.fraction]+00:00", the fraction without trailing
 * zeros) and its value as whole seconds since 2000-01-01 UTC plus
 * microseconds (what the binary COPY format carries, and what sorts).
 */
export interface PgTime {
  text: string;
  seconds: number;
  micros: number;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Whether `day` exists in `month` (1-12) of `year` (proleptic Gregorian). */
export function isDayOfMonth(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!);
}

/** Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch for dates and timestamps. */
const PG_EPOCH_DAYS = 10957;

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** Seconds since PostgreSQL's epoch of a UTC date and time (fields as written, month 1-12). */
function pgEpochSeconds(y: number, mo: number, d: number, h: number, mi: number, s: number): number {
  return (daysFromCivil(y, mo, d) - PG_EPOCH_DAYS) * 86400 + h * 3600 + mi * 60 + s;
}

/** A checked `YYYY-MM-DD` as days since PostgreSQL's epoch (what the binary COPY format carries). */
export function dateDays(date: string): number {
  return daysFromCivil(digits(date, 0, 4), digits(date, 5, 7), digits(date, 8, 10)) - PG_EPOCH_DAYS;
}

/** The number written by the digits of `s` in [from, to), or -1 if any is not a digit. */
function digits(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

const at = (s: string, i: number, code: number) => s.charCodeAt(i) === code;
// Character codes: - : . T Z z + 0
const DASH = 45, COLON = 58, DOT = 46, T = 84, Z = 90, z = 122, PLUS = 43, MINUS = DASH, ZERO = 48;
/** Microseconds per unit of the last digit of a fraction with 1 to 6 digits. */
const FRACTION_SCALE = [0, 100_000, 10_000, 1_000, 100, 10, 1];

/**
 * An RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`) as
 * PostgreSQL stores it. Null for values PostgreSQL would store differently
 * than written (more than microsecond precision, leap seconds, years outside
 * 1000-9999), which the import refuses rather than silently rounding, and
 * for impossible ones (February 30th, hour 24). Parsed by hand: the import
 * converts millions of these, and a regular expression's match array and
 * substrings per value were a visible share of its time per line.
 */
export function parsePgTime(value: string): PgTime | null {
  const n = value.length;
  if (n < 20 || !at(value, 4, DASH) || !at(value, 7, DASH) || !at(value, 10, T) || !at(value, 13, COLON) || !at(value, 16, COLON)) return null;
  const y = digits(value, 0, 4), mo = digits(value, 5, 7), d = digits(value, 8, 10);
  const h = digits(value, 11, 13), mi = digits(value, 14, 16), s = digits(value, 17, 19);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59 || !isDayOfMonth(y, mo, d)) return null;

  // Fraction: any number of digits after a dot; more than six is more precision than PostgreSQL keeps.
  let zoneAt = 19;
  let micros = 0;
  let lastNonZero = 19;
  if (at(value, 19, DOT)) {
    zoneAt = 20;
    while (zoneAt < n && digits(value, zoneAt, zoneAt + 1) >= 0) zoneAt++;
    const places = zoneAt - 20;
    if (places === 0 || places > 6) return null;
    micros = digits(value, 20, zoneAt) * FRACTION_SCALE[places]!;
    lastNonZero = zoneAt;
    while (lastNonZero > 20 && at(value, lastNonZero - 1, ZERO)) lastNonZero--;
    if (lastNonZero === 20) lastNonZero = 19;
  }

  let offsetMinutes = 0;
  const zone = n - zoneAt;
  if (zone === 1 && (at(value, zoneAt, Z) || at(value, zoneAt, z))) {
    // UTC
  } else if (zone === 6 && (at(value, zoneAt, PLUS) || at(value, zoneAt, MINUS)) && at(value, zoneAt + 3, COLON)) {
    const oh = digits(value, zoneAt + 1, zoneAt + 3), om = digits(value, zoneAt + 4, zoneAt + 6);
    if (oh < 0 || om < 0) return null;
    offsetMinutes = (oh * 60 + om) * (at(value, zoneAt, MINUS) ? -1 : 1);
  } else {
    return null;
  }

  const fraction = lastNonZero > 19 ? value.slice(19, lastNonZero) : '';
  if (offsetMinutes === 0) {
    // Already UTC (what exports and most sources write): the fields are PostgreSQL's as they stand.
    if (y < 1000) return null;
    const text = zone === 6 && lastNonZero === zoneAt && at(value, zoneAt, PLUS) ? value : `${value.slice(0, 19)}${fraction}+00:00`;
    return { text, seconds: pgEpochSeconds(y, mo, d, h, mi, s), micros };
  }
  // Date.UTC reads years 0-99 as 1900-1999: such a year is refused before it could be shifted into one.
  if (y < 100) return null;
  const utc = new Date(Date.UTC(y, mo - 1, d, h, mi, s) - offsetMinutes * 60_000).toISOString();
  if (!/^\d{4}-/.test(utc) || utc < '1000') return null;
  const seconds = pgEpochSeconds(y, mo, d, h, mi, s) - offsetMinutes * 60;
  return { text: `${utc.slice(0, 19)}${fraction}+00:00`, seconds, micros };
}

/** Compares two stored date-times by value. */
export function comparePgTimes(a: PgTime, b: PgTime): number {
  return a.seconds - b.seconds || a.micros - b.micros;
}

/**
 * The week a stored date-time falls in, as its Monday (UTC): days since
 * PostgreSQL's epoch, and as YYYY-MM-DD. The same week as the SQL function
 * source_week() (migrations/005), which counts a team's connections by week.
 */
export function weekOf(time: { seconds: number }): number {
  const day = Math.floor(time.seconds / 86400);
  // 2000-01-03, day 2, was a Monday.
  return day - (((day - 2) % 7) + 7) % 7;
}

export function pgDayText(days: number): string {
  return new Date((days + PG_EPOCH_DAYS) * 86_400_000).toISOString().slice(0, 10);
}

/** The Monday (UTC) of the week the instant `ms` (milliseconds since 1970) falls in, as YYYY-MM-DD: weekOf() for a clock's time. */
export function weekOfInstant(ms: number): string {
  return pgDayText(weekOf({ seconds: Math.floor(ms / 1000) - PG_EPOCH_DAYS * 86400 }));
}

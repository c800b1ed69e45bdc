/**
 * The code of the error a query gets, at once, while the freeze guard finds
 * the database not answering at all (src/db/freeze-guard.ts).
 */
export const DATABASE_FROZEN = 'DATABASE_FROZEN';

/** The driver's and Node's codes for a connection's socket gone, or reset, under its query. */
const CLOSED_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET', 'EPIPE']);

const CONNECTION_CODES = new Set([
  ...CLOSED_CODES,
  'ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'CONNECT_TIMEOUT',
  DATABASE_FROZEN,
]);

/** The `code` of a thrown error (a SQLSTATE, or the driver's or Node's code), if it has a string one. */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when the database could not be reached or could not answer in time:
 * the request is worth retrying, and the right answer is 503, not 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = errorCode(err);
  if (code === undefined) return false;
  return CONNECTION_CODES.has(code)
    || code.startsWith('08') // connection exception
    || code === '57P01' || code === '57P02' || code === '57P03' // shutting down / starting up
    || code === '53300' // too many connections
    || code === '57014' // statement timeout / cancelled
    || code === '25006'; // read-only transaction (a primary that became a standby)
}

/**
 * True for the failures of a database the freeze guard found frozen: that
 * outage is logged once when it starts and once when it ends, so a line per
 * failed request says nothing more.
 */
export function isDatabaseFrozen(err: unknown): boolean {
  return errorCode(err) === DATABASE_FROZEN;
}

/** A unique index or constraint refused a value (SQLSTATE 23505). */
export function isUniqueViolation(err: unknown): boolean {
  return errorCode(err) === '23505';
}

/** PostgreSQL broke a deadlock by failing this transaction (SQLSTATE 40P01). */
export function isDeadlock(err: unknown): boolean {
  return errorCode(err) === '40P01';
}

/** PostgreSQL refused a value (SQLSTATE class 22, data exception: a malformed uuid, say). */
export function isDataException(err: unknown): boolean {
  return errorCode(err)?.startsWith('22') ?? false;
}

/**
 * A statement refused by PostgreSQL for what it asked (SQLSTATE class 22,
 * a value; 23, an integrity rule; 40, a deadlock or serialisation failure):
 * its transaction was rolled back, unlike a connection lost during a commit.
 */
export function isRefusedStatement(err: unknown): boolean {
  return /^(22|23|40)/.test(errorCode(err) ?? '');
}

/** The query's connection closed under it (CLOSED_CODES). */
export function isConnectionClosed(err: unknown): boolean {
  return CLOSED_CODES.has(errorCode(err) ?? '');
}

/** A foreign key refused a row whose parent does not exist (SQLSTATE 23503: a key for a team deleted meanwhile, say). */
export function isForeignKeyViolation(err: unknown): boolean {
  return errorCode(err) === '23503';
}

import postgres from 'postgres';
import { ARRAY_TYPES } from './array-types.js';

export type Sql = postgres.Sql;
export type Tx = postgres.TransactionSql;
/** A pool or an open transaction: anything a query can run on. */
export type Queryable = Sql | Tx;

export interface SqlOptions {
  max?: number;
  statementTimeoutMs?: number;
  connectTimeoutS?: number;
  applicationName?: string;
}

/**
 * A connection pool. Every session runs in UTC so that PostgreSQL writes
 * date-times with the `+00:00` offset the contract asks for.
 */
export function connect(url: string, options: SqlOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutS ?? 5,
    idle_timeout: 60,
    // The driver's default waits 3^n/100 s (up to 20 s) before reconnecting after failures, and
    // queries wait with it: during an outage requests would hang for seconds instead of getting a
    // prompt 503. A short cap keeps any request's wait on a dead database near connect_timeout.
    backoff: (retries: number) => Math.min(0.25, 0.01 * 2 ** retries),
    max_lifetime: 60 * 30,
    onnotice: () => {},
    // The array types are known here: the driver's own fetch of them, on every new connection, could fail unhandled (./array-types.ts).
    fetch_types: false,
    types: ARRAY_TYPES,
    connection: {
      TimeZone: 'UTC',
      application_name: options.applicationName ?? 'hds',
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
    },
  });
}

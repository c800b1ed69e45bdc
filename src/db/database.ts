import type { Config } from '../config.js';
import { connect, type Sql } from './client.js';
import { startEmbeddedPostgres } from './embedded.js';
import { FreezeGuard, type DatabaseHealthChange, type FreezeGuardOptions } from './freeze-guard.js';
import { migrate } from './migrate.js';
import { TransactionGate } from './transaction-gate.js';

export interface Database {
  /** The primary's URL (the embedded server's, when embedded). */
  url: string;
  /** The primary's pool, behind the transaction gate (./transaction-gate.ts), which is the freeze guard when opened with one. */
  sql: Sql;
  /** The primary's freeze guard (src/db/freeze-guard.ts), when opened with one: its transitions, its stats. */
  guard: FreezeGuard | undefined;
  /** Pools for the read replicas (empty without DATABASE_READ_URLS). */
  replicas: Sql[];
  /** True when running on the embedded PostgreSQL. */
  embedded: boolean;
  /** Closes the pools only: an embedded server keeps running (the cluster primary hands it to its workers). */
  closePools(): Promise<void>;
  /** Closes the pools, then stops the embedded server if this process started it. */
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /**
   * Fail the primary's queries at once while it does not answer at all
   * (src/db/freeze-guard.ts): for the server, whose requests must get a 503
   * within two seconds. Not for the CLI: nothing it runs has such a deadline.
   */
  freezeGuard?: boolean | FreezeGuardOptions;
}

/** A guard transition as one line for `log` (until the server points the guard at its own log). */
function describeHealthChange(change: DatabaseHealthChange): string {
  return change.healthy
    ? `database ${change.database} answering again after ${change.frozen_ms} ms frozen`
    : `database ${change.database} frozen (${change.reason}): its queries fail at once until it answers`;
}

/**
 * Connects to DATABASE_URL, or starts/attaches to the embedded PostgreSQL,
 * and applies pending migrations. Used by the server, the cluster primary and the CLI alike.
 */
export async function openDatabase(
  config: Config, log: (msg: string) => void, applicationName = 'hds', openOptions: OpenDatabaseOptions = {},
): Promise<Database> {
  const embedded = config.databaseUrl ? undefined : await startEmbeddedPostgres(config.dataDir, log);
  const url = config.databaseUrl ?? embedded!.url;
  const options = {
    max: config.dbPoolMax,
    statementTimeoutMs: config.dbStatementTimeoutMs,
    connectTimeoutS: config.dbConnectTimeoutS,
    applicationName,
  };
  const pool = connect(url, options);
  const replicas = config.databaseReadUrls.map((u) => connect(u, { ...options, applicationName: `${applicationName}-read` }));
  const { freezeGuard } = openOptions;
  const guard = freezeGuard
    ? new FreezeGuard(pool, url, { applicationName: `${applicationName}-health`, ...(freezeGuard === true ? {} : freezeGuard) })
    : undefined;
  if (guard) guard.onHealthChange = (change) => log(describeHealthChange(change));
  // The CLI's and the cluster primary's transactions survive a lost connection too.
  const sql = (guard ?? new TransactionGate(pool)).sql;
  const closePools = async () => {
    await guard?.close();
    // A frozen primary answers nothing: waiting 5 s for its connections to finish would only delay the exit.
    const timeout = guard?.frozen ? 0 : 5;
    await Promise.all([pool.end({ timeout }), ...replicas.map((s) => s.end({ timeout: 5 }))]);
  };
  const close = async () => {
    await closePools();
    await embedded?.stop();
  };
  try {
    const applied = await migrate(sql);
    if (applied.length > 0) log(`applied migrations: ${applied.join(', ')}`);
  } catch (err) {
    await close();
    throw err;
  }
  return { url, sql, guard, replicas, embedded: !!embedded, closePools, close };
}

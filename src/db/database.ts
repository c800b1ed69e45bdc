import type { Config } from '../config.js';
import { connect, type Sql } from './client.js';
import { startEmbeddedPostgres } from './embedded.js';
import { migrate } from './migrate.js';

export interface Database {
  /** The primary's URL (the embedded server's, when embedded). */
  url: string;
  sql: Sql;
  /** Pools for the read replicas (empty without DATABASE_READ_URLS). */
  replicas: Sql[];
  /** True when running on the embedded PostgreSQL. */
  embedded: boolean;
  /** Closes the pools only: an embedded server keeps running (the cluster primary hands it to its workers). */
  closePools(): Promise<void>;
  /** Closes the pools, then stops the embedded server if this process started it. */
  close(): Promise<void>;
}

/**
 * Connects to DATABASE_URL, or starts/attaches to the embedded PostgreSQL,
 * and applies pending migrations. Used by the server, the cluster primary and the CLI alike.
 */
export async function openDatabase(config: Config, log: (msg: string) => void, applicationName = 'hds'): Promise<Database> {
  const embedded = config.databaseUrl ? undefined : await startEmbeddedPostgres(config.dataDir, log);
  const url = config.databaseUrl ?? embedded!.url;
  const options = {
    max: config.dbPoolMax,
    statementTimeoutMs: config.dbStatementTimeoutMs,
    connectTimeoutS: config.dbConnectTimeoutS,
    applicationName,
  };
  const sql = connect(url, options);
  const replicas = config.databaseReadUrls.map((u) => connect(u, { ...options, applicationName: `${applicationName}-read` }));
  const closePools = async () => {
    await Promise.all([sql, ...replicas].map((s) => s.end({ timeout: 5 })));
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
  return { url, sql, replicas, embedded: !!embedded, closePools, close };
}

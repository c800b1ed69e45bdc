import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import type { Dataset } from './dataset.js';
import { runToEnd } from './processes.js';
import { cli, stopOrphanEmbedded, type DatabaseTarget } from './service.js';

/** Team sizes as the service sees them (`hds teams list`). */
export async function teamCounts(root: string, target: DatabaseTarget): Promise<Map<string, number>> {
  const out = await cli(root, target, ['teams', 'list']);
  const counts = new Map<string, number>();
  for (const line of out.split('\n')) {
    const m = /^([0-9a-f-]{36})\s.*\s(\d+)\s+\S+$/.exec(line.trim());
    if (m) counts.set(m[1]!, Number(m[2]));
  }
  return counts;
}

async function holdsDataset(root: string, target: DatabaseTarget, dataset: Dataset): Promise<boolean> {
  try {
    const counts = await teamCounts(root, target);
    return counts.size === dataset.teams.length && dataset.teams.every((t) => counts.get(t.teamId) === t.users);
  } catch {
    return false;
  }
}

/** `query` on one connection to `url`, closed after. */
export async function onOneConnection<T>(url: string, query: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await query(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The server of `url`, at its `postgres` database: for what is done to, or asked of, the server itself. */
function adminUrl(url: string): string {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  return admin.toString();
}

/** Drops (unless reusable) and creates the bench database on a PostgreSQL server. */
async function recreate(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  // Never drop a database the benchmark did not name.
  if (!/^hds_bench\w*$/.test(name)) throw new Error(`refusing to recreate database "${name}": bench databases are named hds_bench*`);
  await onOneConnection(adminUrl(url), async (sql) => {
    await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await sql.unsafe(`CREATE DATABASE "${name}"`);
  });
}

/**
 * The schema the database was imported under: migrations/ is still edited in
 * place while the project is young, so a reused database is only as good as
 * the migrations it was built with.
 */
function migrationsFingerprint(root: string): string {
  const dir = path.join(root, 'migrations');
  const hash = createHash('sha256');
  for (const name of fs.readdirSync(dir).sort()) hash.update(name).update('\0').update(fs.readFileSync(path.join(dir, name))).update('\0');
  return hash.digest('hex');
}

/** Records, next to the work files, what a database holds; --reuse trusts only a matching record. */
export function markImported(root: string, markerFile: string, dataset: Dataset): void {
  fs.mkdirSync(path.dirname(markerFile), { recursive: true });
  fs.writeFileSync(markerFile, JSON.stringify({ dataset: dataset.file, users: dataset.users, migrations: migrationsFingerprint(root) }) + '\n');
}

/**
 * The database is about to change (the write scenarios): --reuse must not
 * trust it until markImported records, after the writes are undone and
 * checked (bench/restore.ts), that it holds the dataset again. A run that
 * dies in between leaves no marker, and the next run imports again.
 */
export function markChanging(markerFile: string): void {
  fs.rmSync(markerFile, { force: true });
}

function markerMatches(root: string, markerFile: string, dataset: Dataset): boolean {
  try {
    const m = JSON.parse(fs.readFileSync(markerFile, 'utf8')) as { dataset: string; users: number; migrations: string };
    return m.dataset === dataset.file && m.users === dataset.users && m.migrations === migrationsFingerprint(root);
  } catch {
    return false;
  }
}

/**
 * Makes the target ready for an import: an empty database, or, with `reuse`,
 * one that already holds exactly this dataset under the current migrations
 * (then returns false: no import needed).
 */
export async function prepareDatabase(root: string, target: DatabaseTarget, dataset: Dataset, reuse: boolean, markerFile: string, say: (msg: string) => void): Promise<boolean> {
  if ('databaseUrl' in target) await requireAutovacuum(target.databaseUrl);
  const exists = 'databaseUrl' in target ? await databaseExists(target.databaseUrl) : fs.existsSync(target.dataDir);
  if (reuse && exists) {
    if (!markerMatches(root, markerFile, dataset)) {
      say('not reusing the database: it was imported under other migrations (or by another dataset); importing again');
    } else if (await holdsDataset(root, target, dataset)) {
      say('reusing the database of an earlier run (same dataset, same migrations): no import');
      return false;
    } else {
      say('not reusing the database: its team sizes differ from the dataset; importing again');
    }
  }
  fs.rmSync(markerFile, { force: true });
  if ('databaseUrl' in target) {
    say(`creating database ${new URL(target.databaseUrl).pathname.slice(1)}`);
    await recreate(target.databaseUrl);
  } else {
    await stopOrphanEmbedded(target.dataDir);
    fs.rmSync(target.dataDir, { recursive: true, force: true });
  }
  return true;
}

/**
 * The bench measures PostgreSQL as it ships: with autovacuum on. Off, the
 * tables' visibility maps go stale after the writes and every read after
 * them costs more than it would in production (issue 27).
 */
async function requireAutovacuum(url: string): Promise<void> {
  const [row] = await onOneConnection(adminUrl(url), (sql) => sql<{ autovacuum: string }[]>`SHOW autovacuum`);
  if (row?.autovacuum !== 'on') {
    throw new Error('the PostgreSQL server has autovacuum off: the bench measures it as it ships; run '
      + '"ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();" as a superuser, or bench the embedded default');
  }
}

async function databaseExists(url: string): Promise<boolean> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const rows = await onOneConnection(adminUrl(url), (sql) => sql`SELECT 1 FROM pg_database WHERE datname = ${name}`);
  return rows.length > 0;
}

/**
 * Puts the import's writes (or the restore's, after the writes) on disk before anything is measured. Left alone, the kernel wrote
 * back the import's dirty pages (about 870 MB for a million users) some 20 s after it, in one
 * burst: in one run that stalled the service for three seconds of get-one
 * (3-7k answers/s instead of 10-13k, p99 19 ms). The import's own time is unchanged: it ends
 * when its transaction is durable, as a user sees it.
 */
export async function flushWrites(target: DatabaseTarget, say: (msg: string) => void): Promise<void> {
  if ('databaseUrl' in target) {
    await onOneConnection(target.databaseUrl, (sql) => sql`CHECKPOINT`).catch((err: Error) => {
      // CHECKPOINT needs a superuser or pg_checkpoint: the OS-level flush below still runs.
      say(`could not CHECKPOINT (${err.message}): PostgreSQL may still write the import's pages during the load`);
    });
  }
  await runToEnd('sync', 'sync', []);
}

/** Drops (if there) and creates the bench database `name` on the server of `serverUrl` (recreate's rule on names); answers its URL. */
export async function freshDatabase(serverUrl: string, name: string): Promise<string> {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  await recreate(url.toString());
  return url.toString();
}

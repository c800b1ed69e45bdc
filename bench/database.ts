import fs from 'node:fs';
import postgres from 'postgres';
import type { Dataset } from './dataset.js';
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

/** Drops (unless reusable) and creates the bench database on a PostgreSQL server. */
async function recreate(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  // Never drop a database the benchmark did not name.
  if (!/^hds_bench\w*$/.test(name)) throw new Error(`refusing to recreate database "${name}": bench databases are named hds_bench*`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await sql.unsafe(`CREATE DATABASE "${name}"`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Makes the target ready for an import: an empty database, or, with `reuse`,
 * one that already holds exactly this dataset (then returns false: no import needed).
 */
export async function prepareDatabase(root: string, target: DatabaseTarget, dataset: Dataset, reuse: boolean, say: (msg: string) => void): Promise<boolean> {
  const exists = 'databaseUrl' in target ? await databaseExists(target.databaseUrl) : fs.existsSync(target.dataDir);
  if (reuse && exists && (await holdsDataset(root, target, dataset))) {
    say('reusing the database of an earlier run (same dataset): no import');
    return false;
  }
  if ('databaseUrl' in target) {
    say(`creating database ${new URL(target.databaseUrl).pathname.slice(1)}`);
    await recreate(target.databaseUrl);
  } else {
    await stopOrphanEmbedded(target.dataDir);
    fs.rmSync(target.dataDir, { recursive: true, force: true });
  }
  return true;
}

async function databaseExists(url: string): Promise<boolean> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
    return rows.length > 0;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

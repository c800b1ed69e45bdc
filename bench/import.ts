import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { onOneConnection } from './database.js';
import { highWaterMark, startProcess } from './processes.js';
import { databaseEnv, type DatabaseTarget } from './service.js';

export interface ImportResult {
  users: number;
  seconds: number;
  usersPerSec: number;
  /** Peak resident set of the import process (VmHWM), in MB. */
  peakRssMb: number;
  /**
   * The most disk the import took at once, in MB: free space at its start less
   * the least seen while it ran (every 200 ms), over the filesystems of its
   * spool (the temporary directory) and of the database's data directory.
   * Spool, new tables, their indexes and WAL all count; nothing else should
   * write meanwhile.
   */
  diskPeakMb: number;
  /** The database's size once the import is flushed (pg_database_size), in bytes per user. */
  bytesPerUser?: number;
  /** The CLI's own summary line. */
  summary: string;
  /** The anchor (runRawCopy), when it ran: PostgreSQL's raw COPY of the file, and its seconds over the import's. */
  rawCopy?: RawCopyResult & { ratio: number };
}

/**
 * Imports the dataset with the built CLI, as an operator would, timing the
 * whole command (start-up and migrations included). The peak memory is the
 * kernel's high-water mark of the CLI process, read until it exits; the
 * embedded PostgreSQL it may start is not counted (it is the database).
 */
export async function runImport(root: string, target: DatabaseTarget, file: string, users: number): Promise<ImportResult> {
  const disks = oneDirPerFilesystem([os.tmpdir(), await dataDirectoryOf(target)]);
  const started = Date.now();
  const child = startProcess('hds import', process.execPath, [path.join(root, 'dist/cli/hds.js'), 'import', file], { env: databaseEnv(target) });
  let stdout = '';
  let stderr = '';
  child.proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let peakKb = 0;
  const timer = setInterval(() => {
    peakKb = Math.max(peakKb, highWaterMark(child.pid) ?? 0);
  }, 20);
  const freeAtStart = freeBytes(disks);
  let diskPeak = 0;
  const diskTimer = setInterval(() => {
    diskPeak = Math.max(diskPeak, freeAtStart - freeBytes(disks));
  }, 200);
  const code = await child.exited;
  clearInterval(timer);
  clearInterval(diskTimer);
  const seconds = (Date.now() - started) / 1000;
  if (code !== 0) throw new Error(`import failed (exit ${code}): ${stderr.trim().split('\n').slice(-5).join('\n')}`);
  return {
    users,
    seconds,
    usersPerSec: users / seconds,
    peakRssMb: peakKb / 1024,
    diskPeakMb: diskPeak / 2 ** 20,
    summary: stdout.trim().split('\n').pop() ?? '',
  };
}

/**
 * One directory per filesystem among `dirs`, found once before the sampling: those that do not
 * exist here (a server's data directory on another machine, or unreadable) are left out, and only
 * the spool's side is then counted.
 */
function oneDirPerFilesystem(dirs: (string | undefined)[]): string[] {
  const byDevice = new Map<number, string>();
  for (const dir of dirs) {
    try {
      if (dir !== undefined) byDevice.set(fs.statSync(dir).dev, dir);
    } catch {
      // Not on this machine.
    }
  }
  return [...byDevice.values()];
}

/** Free bytes, summed over `dirs`, one per filesystem. */
function freeBytes(dirs: string[]): number {
  return dirs.reduce((free, dir) => {
    const fsStat = fs.statfsSync(dir);
    return free + fsStat.bavail * fsStat.bsize;
  }, 0);
}

/** Where the database keeps its files, when this process may know it (SHOW data_directory needs pg_read_all_settings). */
async function dataDirectoryOf(target: DatabaseTarget): Promise<string | undefined> {
  if ('dataDir' in target) return target.dataDir;
  return onOneConnection(target.databaseUrl, async (sql) => (await sql<{ data_directory: string }[]>`SHOW data_directory`)[0]?.data_directory)
    .catch(() => undefined);
}

/** The database's size in bytes per user, after the import (server targets only: an embedded one is stopped by then). */
export async function bytesPerUser(target: DatabaseTarget, users: number): Promise<number | undefined> {
  if (!('databaseUrl' in target)) return undefined;
  const [row] = await onOneConnection(target.databaseUrl, (sql) => sql<{ bytes: string }[]>`SELECT pg_database_size(current_database())::text AS bytes`);
  return Number(row!.bytes) / users;
}

export interface RawCopyResult {
  /** Rows the table held after the COPY (the file's lines). */
  rows: number;
  seconds: number;
}

/**
 * The import's anchor (issue 31): PostgreSQL's raw COPY of the same file's
 * lines, as text, into a fresh UNLOGGED one-column table of the same
 * database: what moving the bytes into the server costs, with no checking,
 * no encoding and no indexes. Timed from the COPY statement to its end
 * (the file streamed by the postgres driver); the table is dropped after.
 * The import is then reported as a ratio: COPY seconds over import seconds.
 * The dataset's lines hold no tab (the text format's delimiter) and no
 * `\.` line; backslashes (JSON escapes) are read as COPY escapes, which
 * only changes a stored row's bytes, not its count.
 */
export async function runRawCopy(target: DatabaseTarget, file: string): Promise<RawCopyResult> {
  const embedded = 'dataDir' in target ? await startEmbeddedPostgres(target.dataDir) : undefined;
  const table = `bench_raw_copy_${process.pid}`;
  try {
    return await onOneConnection(embedded?.url ?? ('databaseUrl' in target ? target.databaseUrl : ''), async (sql) => {
      try {
        await sql.unsafe(`DROP TABLE IF EXISTS ${table}`);
        await sql.unsafe(`CREATE UNLOGGED TABLE ${table} (line text)`);
        const started = performance.now();
        const copy = await sql.unsafe(`COPY ${table} (line) FROM STDIN`).writable();
        await pipeline(fs.createReadStream(file, { highWaterMark: 1 << 20 }), copy);
        const seconds = (performance.now() - started) / 1000;
        const [counted] = await sql.unsafe<{ n: string }[]>(`SELECT count(*) AS n FROM ${table}`);
        return { rows: Number(counted!.n), seconds };
      } finally {
        await sql.unsafe(`DROP TABLE IF EXISTS ${table}`).catch(() => {});
      }
    });
  } finally {
    await embedded?.stop();
  }
}

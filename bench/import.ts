import path from 'node:path';
import { highWaterMark, startProcess } from './processes.js';
import { databaseEnv, type DatabaseTarget } from './service.js';

export interface ImportResult {
  users: number;
  seconds: number;
  usersPerSec: number;
  /** Peak resident set of the import process (VmHWM), in MB. */
  peakRssMb: number;
  /** The CLI's own summary line. */
  summary: string;
}

/**
 * Imports the dataset with the built CLI, as an operator would, timing the
 * whole command (start-up and migrations included). The peak memory is the
 * kernel's high-water mark of the CLI process, read until it exits; the
 * embedded PostgreSQL it may start is not counted (it is the database).
 */
export async function runImport(root: string, target: DatabaseTarget, file: string, users: number): Promise<ImportResult> {
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
  const code = await child.exited;
  clearInterval(timer);
  const seconds = (Date.now() - started) / 1000;
  if (code !== 0) throw new Error(`import failed (exit ${code}): ${stderr.trim().split('\n').slice(-5).join('\n')}`);
  return {
    users,
    seconds,
    usersPerSec: users / seconds,
    peakRssMb: peakKb / 1024,
    summary: stdout.trim().split('\n').pop() ?? '',
  };
}

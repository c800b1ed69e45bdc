import fs from 'node:fs';
import path from 'node:path';
import { startService, stopService } from './service.js';

export interface StartupResult {
  /** Empty data directory to first answered request (initdb, start, migrations, demo seed, listen). */
  firstStartMs: number;
  /** Same directory, second start. */
  restartMs: number;
}

/**
 * The embedded default as a newcomer meets it: `node dist/server.js` with no
 * DATABASE_URL and an empty DATA_DIR, timed from spawn to the first HTTP
 * answer; then stopped and started again. The directory is removed after.
 */
export async function measureStartup(root: string, workDir: string, logDir: string): Promise<StartupResult> {
  const dataDir = path.join(workDir, `startup-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  try {
    const first = await startService({ root, target: { dataDir }, logFile: path.join(logDir, 'startup-first.log'), timeoutMs: 120_000 });
    await stopService(first);
    const again = await startService({ root, target: { dataDir }, logFile: path.join(logDir, 'startup-restart.log'), timeoutMs: 120_000 });
    await stopService(again);
    return { firstStartMs: first.startMs, restartMs: again.startMs };
  } finally {
    // The first start prints the demo team's key for the newcomer; it has no business in our logs.
    for (const log of ['startup-first.log', 'startup-restart.log'].map((f) => path.join(logDir, f))) {
      if (fs.existsSync(log)) fs.writeFileSync(log, fs.readFileSync(log, 'utf8').replace(/hds_[A-Za-z0-9_-]{43}/g, 'hds_<redacted>'));
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

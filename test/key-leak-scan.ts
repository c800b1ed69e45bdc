/**
 * The suite-wide key check: test/run.ts gives every test process a log
 * directory (HDS_TEST_LOG_DIR, see testApp in test/helpers.ts) and, after the
 * run, scans every line written there for anything shaped like an API key
 * (team or management) or a webhook secret.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * Any string shaped like one of our secrets, wherever it sits in a line: a
 * team key or a management key (src/auth/api-key.ts), or a webhook signing
 * secret (src/management/webhooks.ts).
 */
const KEY_SHAPE = /hdsm?_[A-Za-z0-9_-]{43}|whsec_[A-Za-z0-9+/]{32}/;

export interface ScanResult {
  files: number;
  lines: number;
  /** `file:line` of each line holding a key (the key itself is not repeated). */
  leaks: string[];
}

export function scanLogsForKeys(dir: string): ScanResult {
  const result: ScanResult = { files: 0, lines: 0, leaks: [] };
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.log')).sort()) {
    result.files++;
    const lines = fs.readFileSync(path.join(dir, name), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line === '') return;
      result.lines++;
      if (KEY_SHAPE.test(line)) result.leaks.push(`${name}:${i + 1}`);
    });
  }
  return result;
}

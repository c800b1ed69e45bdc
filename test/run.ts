/**
 * `npm test`: runs every test/**\/*.test.ts file with Node's test runner
 * against real PostgreSQL: DATABASE_URL when set, otherwise a throw-away
 * embedded PostgreSQL started here and removed afterwards.
 * Arguments narrow the run: `npm test -- test/users-list.test.ts`.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';
import { connect } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { scanLogsForKeys } from './key-leak-scan.js';

function testFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return testFiles(full);
    return e.name.endsWith('.test.ts') ? [full] : [];
  }).sort();
}

const root = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);
const files = args.length > 0 ? args : testFiles(path.join(root, 'test'));

let embedded: EmbeddedPostgres | undefined;
let tmp: string | undefined;
if (!process.env.DATABASE_URL) {
  // Under /tmp so that the postgres system user can reach it when we run as root.
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-test-'));
  fs.chmodSync(tmp, 0o755);
  embedded = await startEmbeddedPostgres(tmp);
  process.env.DATABASE_URL = embedded.url;
  process.stderr.write(`test: embedded PostgreSQL in ${tmp}\n`);
} else {
  process.stderr.write('test: using DATABASE_URL\n');
}
const sql = connect(process.env.DATABASE_URL);
await migrate(sql);
await sql.end();

// Every test app logs here (test/helpers.ts testApp); scanned for API keys after the run.
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-test-logs-'));
process.env.HDS_TEST_LOG_DIR = logDir;

// A test that hangs fails instead of holding the run (and CI) forever: after five minutes. Before
// Node 24, --test-timeout bounds each whole file, not each test (nodejs/node#57656), and a long file
// (test/cli.test.ts runs some forty CLI processes) can take several minutes on a loaded machine: there
// the bound is fifteen minutes per file. Either is only a guard against a hang, never a measure of speed:
// the suite must pass with two busy loops beside it on a machine three times slower than this project's.
const testTimeoutMs = Number(process.versions.node.split('.')[0]) >= 24 ? 300_000 : 900_000;
const child = spawn(process.execPath, [
  '--import', 'tsx', '--test', `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`, `--test-timeout=${testTimeoutMs}`, ...files,
], { stdio: 'inherit', env: process.env });
let code: number = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));

const scan = scanLogsForKeys(logDir);
if (scan.leaks.length > 0) {
  process.stderr.write(`test: FAIL: an API key appears in ${scan.leaks.length} log line(s): ${scan.leaks.slice(0, 20).join(', ')} (logs kept in ${logDir})\n`);
  code = 1;
} else if (scan.lines === 0 && args.length === 0) {
  // The whole suite ran and logged nothing: the check above would have passed without looking at anything.
  process.stderr.write(`test: FAIL: no log lines were written in ${logDir}, so the key check saw nothing\n`);
  code = 1;
} else {
  process.stderr.write(`test: no API key in ${scan.lines} log lines from ${scan.files} test process(es)\n`);
  fs.rmSync(logDir, { recursive: true, force: true });
}

await embedded?.stop();
if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
process.exit(code);

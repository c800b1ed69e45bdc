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

const child = spawn(process.execPath, [
  '--import', 'tsx', '--test', `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`, ...files,
], { stdio: 'inherit', env: process.env });
const code: number = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));

await embedded?.stop();
if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
process.exit(code);

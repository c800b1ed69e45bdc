/**
 * No half-written data: the CLI import is killed with SIGKILL while it
 * streams a large file; nothing of the file is visible afterwards, and the
 * same import run again succeeds in full.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import { databaseUrl, GEN_USERS, ROOT, testSql } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LINES = 200_000;

function runImport(file: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'cli', 'hds.ts'), 'import', file], {
    cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl() }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => output };
}

describe('import killed midway', () => {
  let sql: Sql;
  let dir: string;
  let file: string;
  let teamIds: string[];
  let sampleUserIds: string[];

  before(() => {
    sql = testSql();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-import-kill-'));
    file = path.join(dir, 'users.jsonl');
    // A random seed: ids never collide with another run on the same database.
    execFileSync('sh', ['-c', `"${process.execPath}" "${GEN_USERS}" --users ${LINES} --teams 3 --seed ${randomInt(1, 2 ** 31)} > "${file}"`]);
    const text = fs.readFileSync(file, 'utf8');
    const lines = text.split('\n').filter(Boolean);
    assert.equal(lines.length, LINES);
    const records = [lines[0]!, lines[Math.floor(LINES / 2)]!, lines.at(-1)!].map((l) => JSON.parse(l) as { user_id: string; team_id: string });
    teamIds = [...new Set(lines.map((l) => l.slice(l.indexOf('"team_id":"') + 11, l.indexOf('"team_id":"') + 47)))];
    sampleUserIds = records.map((r) => r.user_id);
  });
  after(async () => {
    await sql.end();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const visible = async () => {
    const [row] = await sql<{ users: number; teams: number; sample: number }[]>`
      SELECT (SELECT count(*)::int FROM users WHERE team_id = ANY(${teamIds}::uuid[])) AS users,
             (SELECT count(*)::int FROM teams WHERE team_id = ANY(${teamIds}::uuid[])) AS teams,
             (SELECT count(*)::int FROM users WHERE user_id = ANY(${sampleUserIds}::uuid[])) AS sample`;
    return row!;
  };

  it('leaves nothing behind when killed while streaming, and succeeds when run again', async () => {
    assert.equal(teamIds.length, 3);
    const first = runImport(file);
    // Streaming: its COPY is running in the database.
    const started = Date.now();
    for (;;) {
      const copying = await sql`SELECT 1 FROM pg_stat_activity WHERE application_name = 'hds-cli' AND state = 'active' AND query ILIKE 'COPY%'`;
      if (copying.length > 0) break;
      assert.equal(first.child.exitCode, null, `the import ended before streaming: ${first.output()}`);
      assert.ok(Date.now() - started < 30_000, 'the import starts streaming within 30 s');
      await sleep(20);
    }
    await sleep(1000);
    assert.equal(first.child.exitCode, null, 'still importing when killed (midway)');
    first.child.kill('SIGKILL');
    assert.equal((await first.exited).signal, 'SIGKILL');

    // Its server session notices the dead client and rolls back.
    for (const t = Date.now(); (await sql`SELECT 1 FROM pg_stat_activity WHERE application_name = 'hds-cli' AND query ILIKE 'COPY%'`).length > 0;) {
      assert.ok(Date.now() - t < 10_000, 'the killed import\'s session ends');
      await sleep(50);
    }
    assert.deepEqual(await visible(), { users: 0, teams: 0, sample: 0 }, 'nothing of the killed import is visible');

    const second = runImport(file);
    const { code } = await second.exited;
    assert.equal(code, 0, second.output());
    assert.match(second.output(), new RegExp(`imported ${LINES} lines`));
    assert.deepEqual(await visible(), { users: LINES, teams: 3, sample: 3 });
  });
});

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
import { IMPORT_LOCK } from '../src/import/import.js';
import { deleteTeam } from '../src/teams/team-store.js';
import { databaseUrl, GEN_USERS, NO_RATE_LIMITS, ROOT, testSql, until } from './helpers.js';

const LINES = 200_000;

function runImport(file: string, tmp: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'cli', 'hds.ts'), 'import', file], {
    cwd: ROOT, env: { ...process.env, ...NO_RATE_LIMITS, DATABASE_URL: databaseUrl(), TMPDIR: tmp }, stdio: ['ignore', 'pipe', 'pipe'],
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
    // Its 200,000 users out of the shared test database: every later bulk import copies the stored rows
    // (the two import test files after this one took 68 s with them, 40 s without). Under the imports' lock,
    // so that no bulk load of another test file has copied them before and swaps them back in after.
    // 'missing': the import failed.
    await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${IMPORT_LOCK})`;
      await tx`DELETE FROM user_sources WHERE user_id IN (SELECT user_id FROM users WHERE team_id = ANY(${teamIds}::uuid[]))`;
      await tx`DELETE FROM users WHERE team_id = ANY(${teamIds}::uuid[])`;
    });
    for (const teamId of teamIds) assert.notEqual(await deleteTeam(sql, teamId), 'has_users');
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
    const first = runImport(file, dir);
    // Midway: its COPY has streamed rows into the import's transaction, which has not committed.
    // (A condition, not a fixed pause: a pause would be too short on a slow machine and, on a
    // fast one, long enough for the whole import to finish.)
    await until('the import streams rows into the database', 60_000, async () => {
      assert.equal(first.child.exitCode, null, `the import ended before it was seen streaming: ${first.output()}`);
      const [copy] = await sql<{ rows: number }[]>`
        SELECT coalesce(max(p.tuples_processed), 0)::int AS rows
        FROM pg_stat_progress_copy p JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'hds-cli'`;
      return copy!.rows > 0;
    });
    assert.equal(first.child.exitCode, null, 'still importing when killed (midway)');
    first.child.kill('SIGKILL');
    assert.equal((await first.exited).signal, 'SIGKILL');

    // Its server session notices the dead client and rolls back.
    await until('the killed import\'s session ends', 60_000, async () =>
      (await sql`SELECT 1 FROM pg_stat_activity WHERE application_name = 'hds-cli' AND query ILIKE 'COPY%'`).length === 0);
    assert.deepEqual(await visible(), { users: 0, teams: 0, sample: 0 }, 'nothing of the killed import is visible');
    const spoolOf = (pid: number) => fs.readdirSync(dir).filter((name) => name.startsWith(`hds-import-${pid}-`));
    assert.equal(spoolOf(first.child.pid!).length, 1, 'the killed import left its spool behind');

    const second = runImport(file, dir);
    const { code } = await second.exited;
    assert.equal(code, 0, second.output());
    assert.match(second.output(), new RegExp(`imported ${LINES} lines`));
    assert.deepEqual(await visible(), { users: LINES, teams: 3, sample: 3 });
    assert.deepEqual(spoolOf(first.child.pid!), [], 'the next import removed the killed one\'s spool');
    assert.deepEqual(spoolOf(second.child.pid!), [], 'and its own');
  });
});

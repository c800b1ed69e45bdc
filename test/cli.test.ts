/**
 * The admin CLI, run as a child process the way an operator runs it
 * (`node --import tsx src/cli/hds.ts ...`, DATABASE_URL from the environment).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { byListOrder, canonicalTimes, GEN_USERS, runHds, teamWithKey, testApp, testSql, withSortedSources, type Run } from './helpers.js';

const KEY = /^hds_[A-Za-z0-9_-]{43}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const hds = runHds;

/** Runs `hds` for each argument list, a few at a time (the machine is shared), answers in order. */
async function hdsAll(argLists: string[][], atOnce = 4): Promise<Run[]> {
  const runs: Run[] = [];
  for (let i = 0; i < argLists.length; i += atOnce) runs.push(...await Promise.all(argLists.slice(i, i + atOnce).map((a) => hds(a))));
  return runs;
}

const describeRun = (r: Run) => `exit ${r.code}\nstdout: ${r.stdout.slice(0, 2000)}\nstderr: ${r.stderr.slice(0, 2000)}`;
const stdoutLines = (r: Run) => r.stdout.split('\n').filter(Boolean);

/** Generated JSON Lines, exactly as tools/gen-users.mjs writes them. */
function generatedFile(users: number, teams: number): string {
  return execFileSync(process.execPath, [GEN_USERS, '--users', String(users), '--teams', String(teams), '--seed', String(randomInt(1, 2 ** 31))],
    { maxBuffer: 1 << 30 }).toString();
}

const parseLines = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);

/** The import summary's counts. */
function summary(r: Run): { added: number; updated: number } {
  const m = /(\d+) users added, (\d+) updated/.exec(r.stdout);
  assert.ok(m, `no summary in: ${r.stdout}`);
  return { added: Number(m[1]), updated: Number(m[2]) };
}

/**
 * Everything stored for these teams, as checksums: the users' rows and
 * documents, the source links, and the team rows with their row versions
 * (xmin changes on any rewrite, even to equal values: every write to a
 * team's users rewrites its row, src/writes/team-state.ts). Not the users'
 * own row versions: another test file's bulk import rebuilds the whole users
 * table, every row with a new xmin and the same values.
 */
async function checksum(sql: Sql, teamIds: string[]): Promise<Record<string, string>> {
  const [row] = await sql<Record<string, string>[]>`
    SELECT
      (SELECT md5(string_agg(u::text, E'\n' ORDER BY u.user_id))
       FROM users u WHERE u.team_id = ANY(${teamIds}::uuid[])) AS users,
      (SELECT md5(string_agg(us::text, E'\n' ORDER BY us.user_id, us.source_id))
       FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ANY(${teamIds}::uuid[])) AS links,
      (SELECT md5(string_agg(t::text || '|' || t.xmin::text, E'\n' ORDER BY t.team_id))
       FROM teams t WHERE t.team_id = ANY(${teamIds}::uuid[])) AS teams`;
  return row!;
}

describe('hds CLI', () => {
  let sql: Sql;
  let tmp: string;

  before(() => {
    sql = testSql();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-cli-test-'));
  });
  after(async () => {
    await sql.end();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  describe('usage', () => {
    it('--help on every command exits 0 and shows the usage', async () => {
      const commands = [[], ['teams', 'create'], ['teams', 'list'], ['keys', 'create'], ['keys', 'list'], ['keys', 'revoke'],
        ['keys', 'rotate'], ['import'], ['export'], ['check'], ['migrate']];
      const runs = await hdsAll(commands.map((c) => [...c, '--help']));
      for (const [i, r] of runs.entries()) {
        assert.equal(r.code, 0, `${commands[i]!.join(' ')} --help: ${describeRun(r)}`);
        assert.match(r.stdout, /usage: hds/);
        if (commands[i]!.length > 0) assert.ok(r.stdout.includes(commands[i]!.join(' ')), r.stdout);
      }
    });

    it('wrong usage exits 2 with a one-line reason', async () => {
      const team = await teamWithKey(sql, 'cli usage');
      const wrong = [
        ['frobnicate'],
        ['teams', 'frobnicate'],
        ['teams', 'create', 'extra'],
        ['teams', 'create', '--nope'],
        ['keys', 'create'],
        ['keys', 'create', '--team', 'not-a-uuid'],
        ['keys', 'create', '--team', team.teamId, '--expires-in', 'forever'],
        ['keys', 'list', '--team', randomUUID()],
        ['keys', 'revoke'],
        ['keys', 'revoke', 'not-a-uuid'],
        ['keys', 'revoke', randomUUID()],
        ['import'],
        ['import', 'a.jsonl', 'b.jsonl'],
        ['import', path.join(tmp, 'no-such-file.jsonl')],
        ['import', '-', '--method', 'fastest'],
        ['export'],
        ['export', '--team', team.teamId, '--format', 'csv'],
      ];
      const runs = await hdsAll(wrong);
      for (const [i, r] of runs.entries()) {
        const what = `hds ${wrong[i]!.join(' ')}: ${describeRun(r)}`;
        assert.equal(r.code, 2, what);
        assert.equal(r.stdout, '', what);
        const reason = r.stderr.trim().split('\n').filter((l) => !l.startsWith('hds: applied migrations'));
        assert.equal(reason.length, 1, what);
        assert.ok(reason[0]!.length > 10, what);
      }
      const keys = await sql`SELECT 1 FROM api_keys WHERE team_id = ${team.teamId}`;
      assert.equal(keys.length, 1, 'a refused keys create issued no key');
    });

    it('no command at all exits 2 with a one-line reason pointing at --help', async () => {
      const r = await hds([]);
      assert.equal(r.code, 2, describeRun(r));
      assert.equal(r.stdout, '', describeRun(r));
      assert.deepEqual(r.stderr.trim().split('\n').length, 1, describeRun(r));
      assert.match(r.stderr, /--help/);
    });
  });

  describe('teams', () => {
    it('create prints the new id; list shows it with its name and user count', async () => {
      const name = `cli-team-${randomUUID().slice(0, 8)}`;
      const created = await hds(['teams', 'create', '--name', name]);
      assert.equal(created.code, 0, describeRun(created));
      const teamId = created.stdout.trim();
      assert.match(teamId, UUID);
      const [row] = await sql`SELECT name, user_count FROM teams WHERE team_id = ${teamId}`;
      assert.equal(row?.name, name);

      const listed = await hds(['teams', 'list']);
      assert.equal(listed.code, 0, describeRun(listed));
      const line = stdoutLines(listed).find((l) => l.includes(teamId));
      assert.ok(line, `team ${teamId} not listed`);
      assert.deepEqual(line.trim().split(/\s+/).slice(0, 3), [teamId, name, '0']);
    });
  });

  describe('keys', () => {
    let app: App;
    let teamId: string;
    before(async () => {
      app = await testApp(sql);
      teamId = (await teamWithKey(sql, 'cli keys')).teamId;
    });
    after(async () => app.close());

    const list = (key: string) => app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': key } });

    it('create prints the key alone on the last line; list shows it without the key; revoke stops it', async () => {
      const created = await hds(['keys', 'create', '--team', teamId, '--name', 'cli-key']);
      assert.equal(created.code, 0, describeRun(created));
      const key = stdoutLines(created).at(-1)!;
      assert.match(key, KEY);
      const expiring = await hds(['keys', 'create', '--team', teamId, '--name', 'cli-expiring', '--expires-in', '90d']);
      assert.equal(expiring.code, 0, describeRun(expiring));
      const expiringKey = stdoutLines(expiring).at(-1)!;
      assert.match(expiringKey, KEY);
      assert.notEqual(expiringKey, key);

      // Both work, and the first is now in the app's key cache.
      assert.equal((await list(key)).statusCode, 200);
      assert.equal((await list(expiringKey)).statusCode, 200);

      const [stored] = await sql<{ key_id: string }[]>`SELECT key_id FROM api_keys WHERE team_id = ${teamId} AND name = 'cli-key'`;
      const keyId = stored!.key_id;
      const listed = await hds(['keys', 'list', '--team', teamId]);
      assert.equal(listed.code, 0, describeRun(listed));
      for (const secret of [key, expiringKey]) {
        assert.ok(!listed.stdout.includes(secret.slice(10)), 'keys list shows key material');
        assert.ok(!listed.stderr.includes(secret.slice(10)), 'keys list shows key material');
      }
      const row = stdoutLines(listed).find((l) => l.includes(keyId));
      assert.ok(row, `key ${keyId} not listed:\n${listed.stdout}`);
      const [id, name, prefix, , , , revoked] = row.trim().split(/\s+/);
      assert.deepEqual([id, name, prefix, revoked], [keyId, 'cli-key', key.slice(0, prefix!.length), '-']);
      assert.ok(prefix!.length >= 6 && prefix!.length < 16, `display prefix ${prefix}`);
      const expiringRow = stdoutLines(listed).find((l) => l.includes('cli-expiring'))!;
      const expires = Date.parse(expiringRow.trim().split(/\s+/)[5]!);
      assert.ok(Math.abs(expires - (Date.now() + 90 * 86_400_000)) < 3_600_000, `expiry ${expiringRow}`);

      const revoked2 = await hds(['keys', 'revoke', keyId]);
      assert.equal(revoked2.code, 0, describeRun(revoked2));
      // The verifier caches a key for at most KEY_CACHE_TTL_MS (500 ms by default): the cache period
      // passing is what is tested here, so this wait is the behaviour, not a guess at speed.
      await new Promise((r) => setTimeout(r, 600));
      const refused = await list(key);
      assert.equal(refused.statusCode, 401);
      assert.ok(refused.headers['www-authenticate']);
      const fresh = await testApp(sql);
      try {
        assert.equal((await fresh.inject({ url: '/v2/user/', headers: { 'x-service-api-key': key } })).statusCode, 401);
      } finally {
        await fresh.close();
      }
      // The team's other key is untouched.
      assert.equal((await list(expiringKey)).statusCode, 200);

      const after = await hds(['keys', 'list', '--team', teamId]);
      const revokedAt = stdoutLines(after).find((l) => l.includes(keyId))!.trim().split(/\s+/)[6]!;
      assert.ok(Math.abs(Date.parse(revokedAt) - Date.now()) < 60_000, `revoked column: ${revokedAt}`);
    });
  });

  describe('import and export', () => {
    let file: string;
    let records: Record<string, any>[];
    let teamIds: string[];

    before(() => {
      file = path.join(tmp, 'users.jsonl');
      fs.writeFileSync(file, generatedFile(3000, 3));
      records = parseLines(fs.readFileSync(file, 'utf8'));
      teamIds = [...new Set(records.map((r) => r.team_id as string))];
    });

    it('exporting each team gives back the imported values, in list order', async () => {
      assert.equal(teamIds.length, 3);
      const imported = await hds(['import', file]);
      assert.equal(imported.code, 0, describeRun(imported));
      assert.deepEqual(summary(imported), { added: 3000, updated: 0 });

      for (const teamId of teamIds) {
        const exported = await hds(['export', '--team', teamId]);
        assert.equal(exported.code, 0, describeRun(exported));
        const got = parseLines(exported.stdout);
        const expected = records.filter((r) => r.team_id === teamId).sort((a, b) => byListOrder(a as any, b as any));
        assert.deepEqual(got.map((u) => u.user_id), expected.map((u) => u.user_id), `team ${teamId}: users and order`);
        assert.deepEqual(canonicalTimes(got), canonicalTimes(expected.map(withSortedSources)), `team ${teamId}: values`);
      }

      const teams = await hds(['teams', 'list']);
      for (const teamId of teamIds) {
        const line = stdoutLines(teams).find((l) => l.startsWith(teamId));
        assert.ok(line, `imported team ${teamId} listed`);
        assert.ok(line.includes(` ${records.filter((r) => r.team_id === teamId).length} `), line);
      }
    });

    it('importing the same file again changes nothing', async () => {
      const before = await checksum(sql, teamIds);
      const again = await hds(['import', file]);
      assert.equal(again.code, 0, describeRun(again));
      assert.deepEqual(summary(again), { added: 0, updated: 0 });
      assert.deepEqual(await checksum(sql, teamIds), before);
    });

    it('imports from standard input with -', async () => {
      const text = generatedFile(60, 1);
      const [teamId] = new Set(parseLines(text).map((r) => r.team_id as string));
      const imported = await hds(['import', '-'], text);
      assert.equal(imported.code, 0, describeRun(imported));
      assert.deepEqual(summary(imported), { added: 60, updated: 0 });
      const exported = await hds(['export', '--team', teamId!]);
      const expected = parseLines(text).sort((a, b) => byListOrder(a as any, b as any)).map(withSortedSources);
      assert.deepEqual(canonicalTimes(parseLines(exported.stdout)), canonicalTimes(expected));
    });

    it('loads standard input in bulk with --method bulk, in several batches', async () => {
      const text = generatedFile(4000, 2);
      assert.ok(text.length > 2 << 20, 'more than one batch of input');
      const imported = await hds(['import', '-', '--method', 'bulk'], text);
      assert.equal(imported.code, 0, describeRun(imported));
      assert.match(imported.stdout, /\(bulk load\)$/m);
      assert.deepEqual(summary(imported), { added: 4000, updated: 0 });
      for (const teamId of new Set(parseLines(text).map((r) => r.team_id as string))) {
        const exported = await hds(['export', '--team', teamId]);
        const expected = parseLines(text).filter((r) => r.team_id === teamId).sort((a, b) => byListOrder(a as any, b as any)).map(withSortedSources);
        assert.deepEqual(canonicalTimes(parseLines(exported.stdout)), canonicalTimes(expected));
      }
    });

    /** Imports `lines` (a line 1500 of 3000 made bad by `spoil`) and checks that nothing from the file was written. */
    async function assertBadLineWritesNothing(spoil: (lines: string[]) => void, reason: RegExp): Promise<void> {
      const lines = generatedFile(3000, 3).split('\n').filter(Boolean);
      // A source only this file has, to see whether the catalogue was written.
      const slug = `cli_bad_${randomUUID().slice(0, 8)}`;
      const tenth = JSON.parse(lines[9]!);
      tenth.connected_sources.push({ created_on: tenth.created_on, source: { name: 'Bad Import', slug, logo: 'https://example.com/x.png' } });
      lines[9] = JSON.stringify(tenth);
      spoil(lines);
      const bad = path.join(tmp, `bad-${slug}.jsonl`);
      fs.writeFileSync(bad, lines.join('\n') + '\n');

      const r = await hds(['import', bad]);
      assert.notEqual(r.code, 0, describeRun(r));
      assert.match(r.stderr, /line 1500\b/, describeRun(r));
      assert.match(r.stderr, reason, describeRun(r));

      const fileRecords = lines.map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
      const fileTeams = [...new Set(fileRecords.map((u) => String(u.team_id)))].filter((t) => UUID.test(t));
      const fileUsers = [...new Set(fileRecords.map((u) => String(u.user_id)))].filter((t) => UUID.test(t));
      assert.equal((await sql`SELECT 1 FROM teams WHERE team_id = ANY(${fileTeams}::uuid[])`).length, 0, 'a team was written');
      assert.equal((await sql`SELECT 1 FROM users WHERE user_id = ANY(${fileUsers}::uuid[])`).length, 0, 'a user was written');
      assert.equal((await sql`SELECT 1 FROM user_sources WHERE user_id = ANY(${fileUsers}::uuid[])`).length, 0, 'a source link was written');
      assert.equal((await sql`SELECT 1 FROM sources WHERE slug = ${slug}`).length, 0, 'a source was written');
    }

    it('a bad value on line 1500 of 3000 names the line and writes nothing', async () => {
      await assertBadLineWritesNothing((lines) => {
        const u = JSON.parse(lines[1499]!);
        lines[1499] = JSON.stringify({ ...u, created_on: 'yesterday' });
      }, /created_on/);
    });

    it('an impossible date-time (February 30th) of a connected source writes nothing', async () => {
      await assertBadLineWritesNothing((lines) => {
        const u = JSON.parse(lines[1499]!);
        const source = { name: 'Oura', slug: 'oura', logo: 'https://example.com/oura.png' };
        lines[1499] = JSON.stringify({ ...u, connected_sources: [{ created_on: '2023-02-30T10:00:00+00:00', source }] });
      }, /connected_sources\.0\.created_on: "2023-02-30T10:00:00\+00:00" is not an RFC 3339 date-time/);
    });

    it('a line that is not JSON writes nothing', async () => {
      await assertBadLineWritesNothing((lines) => { lines[1499] = lines[1499]!.slice(0, -5); }, /JSON/);
    });

    it('a user_id repeated on line 1500 writes nothing', async () => {
      await assertBadLineWritesNothing((lines) => {
        const first = JSON.parse(lines[2]!);
        const u = JSON.parse(lines[1499]!);
        lines[1499] = JSON.stringify({ ...u, user_id: first.user_id });
      }, /user_id/);
    });
  });
});

/**
 * API key lifecycle: several keys at once, expiry, rotation with a grace
 * period through the admin CLI, refusal within a second on every instance
 * that had the key cached, and last-used times recorded in batches.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { issueKey } from '../src/auth/issue-key.js';
import type { Sql } from '../src/db/client.js';
import { databaseUrl, ROOT, teamWithKey, testApp, testSql } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const run = promisify(execFile);

/** The admin CLI as `npm run hds -- ...` runs it (tsx src/cli/hds.ts), on the test database. */
async function hds(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'cli', 'hds.ts'), ...args], {
    cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl() },
  });
}

describe('key lifecycle', () => {
  let sql: Sql;
  let sqlB: Sql;
  let appA: App;
  let appB: App;

  before(async () => {
    sql = testSql();
    // Two instances, as two processes would be: each its own pool and key cache.
    appA = await testApp(sql);
    sqlB = testSql();
    appB = await testApp(sqlB);
  });
  after(async () => {
    await Promise.all([appA.close(), appB.close()]);
    await Promise.all([sql.end(), sqlB.end()]);
  });

  const status = async (app: App, key: string) =>
    (await app.inject({ url: '/v2/user/?limit=1', headers: { 'x-service-api-key': key } })).statusCode;

  /** Milliseconds from now until `key` is refused on each app (Infinity if not within 2 s). */
  async function refusedWithin(key: string, from: number): Promise<number[]> {
    return Promise.all([appA, appB].map(async (app) => {
      while ((await status(app, key)) !== 401) {
        if (Date.now() - from > 2000) return Infinity;
        await sleep(10);
      }
      return Date.now() - from;
    }));
  }

  it('accepts several active keys of one team at once, each for that team only', async () => {
    const team = await teamWithKey(sql);
    const second = await issueKey(sql, team.teamId, 'second');
    const third = await issueKey(sql, team.teamId, 'third');
    for (const key of [team.key, second.key, third.key]) assert.equal(await status(appA, key), 200);
    const created = await appA.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': second.key }, payload: { client_user_id: 'via-second' } });
    const read = await appA.inject({ url: `/v2/user/${created.json().user_id}`, headers: { 'x-service-api-key': third.key } });
    assert.equal(read.statusCode, 200, 'a user created with one key is readable with another key of the team');
  });

  it('refuses a key once its expiry time has passed, on both instances', async () => {
    const team = await teamWithKey(sql);
    const expiresAt = new Date(Date.now() + 600);
    const short = await issueKey(sql, team.teamId, 'short-lived', expiresAt);
    for (const app of [appA, appB]) assert.equal(await status(app, short.key), 200);
    await sleep(Math.max(0, expiresAt.getTime() - Date.now()));
    // Expiry is checked against the clock on every request: no cache delay at all.
    for (const app of [appA, appB]) assert.equal(await status(app, short.key), 401);
    assert.equal(await status(appA, team.key), 200, 'the team\'s other key still works');
  });

  it('a flood of one refused key costs one lookup per cache period and never holds back a valid key', async () => {
    const team = await teamWithKey(sql);
    const unknown = `hds_${'x'.repeat(43)}`;
    const before = appA.verifier.lookups;
    for (let i = 0; i < 30; i++) {
      assert.equal(await status(appA, unknown), 401);
      if (i % 10 === 0) assert.equal(await status(appA, team.key), 200);
    }
    assert.equal(appA.verifier.lookups - before, 2, 'one lookup for the unknown key, one for the valid key');
    // After the cache period the refusal is checked against the database again, as a revocation would be.
    await sleep(600);
    assert.equal(await status(appA, unknown), 401);
    assert.equal(appA.verifier.lookups - before, 3);
  });

  it('keys rotate --grace 24h: a new key at once, the old one kept for the grace period', async () => {
    const team = await teamWithKey(sql);
    const before = Date.now();
    const { stdout } = await hds('keys', 'rotate', '--team', team.teamId, '--grace', '24h');
    const newKey = stdout.trim().split('\n').at(-1)!;
    assert.match(newKey, /^hds_[A-Za-z0-9_-]{43}$/);
    assert.equal(await status(appA, newKey), 200);
    assert.equal(await status(appA, team.key), 200, 'the old key works during the grace period');
    const [old] = await sql<{ expires_at: Date }[]>`SELECT expires_at FROM api_keys WHERE key_id = ${team.keyId}`;
    const graceMs = old!.expires_at.getTime() - before;
    assert.ok(Math.abs(graceMs - 24 * 3600_000) < 60_000, `old key expires ${graceMs} ms after the rotation`);
    const [fresh] = await sql<{ expires_at: Date | null }[]>`SELECT expires_at FROM api_keys WHERE team_id = ${team.teamId} AND key_id <> ${team.keyId}`;
    assert.equal(fresh!.expires_at, null, 'the new key does not expire');
  });

  it('keys rotate --grace 0s: the old key is refused within one second on both instances that cached it', async () => {
    const team = await teamWithKey(sql);
    for (const app of [appA, appB]) assert.equal(await status(app, team.key), 200);
    const { stdout } = await hds('keys', 'rotate', '--team', team.teamId, '--grace', '0s');
    const rotatedAt = Date.now();
    const newKey = stdout.trim().split('\n').at(-1)!;
    for (const ms of await refusedWithin(team.key, rotatedAt)) assert.ok(ms <= 1000, `old key refused only after ${ms} ms`);
    for (const app of [appA, appB]) assert.equal(await status(app, newKey), 200);
  });

  it('keys revoke: refused within one second on both instances that cached it', async () => {
    const team = await teamWithKey(sql);
    const spare = await issueKey(sql, team.teamId, 'spare');
    for (const app of [appA, appB]) assert.equal(await status(app, team.key), 200);
    await hds('keys', 'revoke', team.keyId);
    const revokedAt = Date.now();
    for (const ms of await refusedWithin(team.key, revokedAt)) assert.ok(ms <= 1000, `revoked key refused only after ${ms} ms`);
    assert.equal(await status(appB, spare.key), 200, 'revoking one key leaves the others');
  });

  it('rejects a bad --grace without touching any key', async () => {
    const team = await teamWithKey(sql);
    await assert.rejects(hds('keys', 'rotate', '--team', team.teamId, '--grace', 'soon'), (err: { code?: number; stderr?: string }) =>
      err.code === 2 && /--grace/.test(err.stderr ?? ''));
    const keys = await sql`SELECT 1 FROM api_keys WHERE team_id = ${team.teamId}`;
    assert.equal(keys.length, 1);
    assert.equal(await status(appA, team.key), 200);
  });

  it('records last-used times in batches, not with a write per request', async () => {
    const team = await teamWithKey(sql);
    for (let i = 0; i < 5; i++) assert.equal(await status(appA, team.key), 200);
    const lastUsed = async () => (await sql<{ t: Date | null }[]>`SELECT last_used_at AS t FROM api_keys WHERE key_id = ${team.keyId}`)[0]!.t;
    assert.equal(await lastUsed(), null, 'requests alone wrote nothing');
    const beforeFlush = Date.now();
    await appA.verifier.flushUses();
    const t = await lastUsed();
    assert.ok(t && t.getTime() <= beforeFlush && beforeFlush - t.getTime() < 5000, `last_used_at ${t?.toISOString()}`);
    // A second flush with nothing new writes nothing; a later use moves the time forward.
    await sleep(20);
    assert.equal(await status(appA, team.key), 200);
    await appA.verifier.flushUses();
    assert.ok((await lastUsed())!.getTime() > t.getTime());
  });
});

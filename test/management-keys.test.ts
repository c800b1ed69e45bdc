/**
 * The Management API's keys: management keys from the admin CLI, team API
 * keys over HTTP, the separation of the two kinds (401 both ways, section
 * 2's body), revocation refused within a second on two instances, the
 * failed-authentication budget (the same one as team keys', shared through
 * Redis like it: test/client-addresses.test.ts), every action logged with the key's id, and
 * one implementation behind the CLI and the routes.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { revokeManagementKey } from '../src/auth/key-store.js';
import type { Sql } from '../src/db/client.js';
import { announceDemo, seedDemo } from '../src/demo-seed.js';
import { callAs, comparableHeaders, loggedApp, runHds, teamWithKey, testApp, testSql, type Run } from './helpers.js';
import { allPages, DATE_TIME, manage, MANAGEMENT_KEY, managementKey, UUID, type Management } from './management-helpers.js';

const TEAM_KEY = /^hds_[A-Za-z0-9_-]{43}$/;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const describeRun = (r: Run) => `exit ${r.code}\nstdout: ${r.stdout.slice(0, 2000)}\nstderr: ${r.stderr.slice(0, 2000)}`;
const stdoutLines = (r: Run) => r.stdout.split('\n').filter(Boolean);

/**
 * Asks each app until it refuses: no request sent more than a second after
 * `from` may be accepted. Judged by when each accepted request was sent, not
 * by when the refusal came back (a slow machine answers late, not wrongly).
 */
async function refusedWithinOneSecond(apps: App[], ask: (app: App) => Promise<number>, from: number, what: string): Promise<void> {
  await Promise.all(apps.map(async (app) => {
    for (;;) {
      const sentAt = Date.now();
      const code = await ask(app);
      if (code === 401) return;
      assert.equal(code, 200);
      assert.ok(sentAt - from <= 1000, `${what}: a request sent ${sentAt - from} ms after the revocation was accepted`);
      await sleep(10);
    }
  }));
}

describe('Management API: keys', () => {
  let sql: Sql;
  let sqlB: Sql;
  let appA: App;
  let appB: App;
  let m: Management;

  before(async () => {
    sql = testSql();
    sqlB = testSql();
    // Two instances, as two processes would be: each its own pool and key caches.
    appA = await testApp(sql);
    appB = await testApp(sqlB);
    m = await managementKey(sql);
  });
  after(async () => {
    await Promise.all([appA.close(), appB.close()]);
    await Promise.all([sql.end(), sqlB.end()]);
  });

  const keysPath = () => `${m.base}/team_api_keys/production/us`;

  describe('separation of the two kinds of key', () => {
    it('a team key never opens a management route: the 401 of a missing key, whatever header it is sent in', async () => {
      const team = await teamWithKey(sql);
      const missing = await appA.inject({ url: `${m.base}/team` });
      assert.equal(missing.statusCode, 401);
      assert.deepEqual(missing.json(), { detail: 'Invalid or missing API key' });
      assert.equal(missing.headers['www-authenticate'], 'ApiKey header="x-management-key"');
      for (const headers of [{ 'x-management-key': team.key }, { 'x-service-api-key': team.key }, { 'x-vital-api-key': team.key },
        { 'x-management-key': `hdsm_${randomBytes(32).toString('base64url')}` }, { 'x-management-key': 'garbage' },
        { 'x-service-api-key': m.key }]) {
        const res = await appA.inject({ url: `${m.base}/team`, headers });
        assert.equal(res.statusCode, 401, JSON.stringify(Object.keys(headers)));
        assert.equal(res.body, missing.body);
        assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(missing.headers));
      }
    });

    it('a management key never opens /v2/: the 401 of section 2, in either header', async () => {
      const missing = await appA.inject({ url: '/v2/user/' });
      assert.equal(missing.statusCode, 401);
      for (const headers of [{ 'x-service-api-key': m.key }, { 'x-vital-api-key': m.key }, { 'x-management-key': m.key }]) {
        const res = await appA.inject({ url: '/v2/user/', headers });
        assert.equal(res.statusCode, 401);
        assert.equal(res.body, missing.body);
        assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(missing.headers));
      }
      const post = await appA.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': m.key }, payload: { client_user_id: 'never' } });
      assert.equal(post.statusCode, 401);
      // The two 401s carry the same body; only WWW-Authenticate names each API's own header.
      const management = await appA.inject({ url: `${m.base}/team` });
      assert.equal(management.body, missing.body);
      assert.equal(missing.headers['www-authenticate'], 'ApiKey header="x-service-api-key"');
    });

    it('authentication comes first: without a valid key, no 404, 405-free route or 422 tells anything', async () => {
      for (const url of [`/v1/org/${randomUUID()}/team`, `${m.base}/team/not-a-uuid`, `${m.base}/team_api_keys/staging/us`, `${m.base}/team?limit=0`]) {
        assert.equal((await appA.inject({ url })).statusCode, 401, url);
      }
    });
  });

  describe('management keys', () => {
    it('hds management-keys create prints a key with its own prefix on the last line; list shows it without the key; revoke stops it on both instances within a second', async () => {
      const created = await runHds(['management-keys', 'create', '--label', 'automation']);
      assert.equal(created.code, 0, describeRun(created));
      const key = stdoutLines(created).at(-1)!;
      assert.match(key, MANAGEMENT_KEY);
      const [stored] = await sql<{ key_id: string; key_hash: Buffer; display_prefix: string }[]>`
        SELECT key_id, key_hash, display_prefix FROM management_keys WHERE label = 'automation' ORDER BY created_at DESC LIMIT 1`;
      assert.equal(stored!.key_hash.length, 32, 'only the SHA-256 is stored');
      assert.ok(key.startsWith(stored!.display_prefix));

      const listed = await runHds(['management-keys', 'list']);
      assert.equal(listed.code, 0, describeRun(listed));
      assert.ok(!listed.stdout.includes(key.slice(12)) && !listed.stderr.includes(key.slice(12)), 'the list shows key material');
      const row = stdoutLines(listed).find((l) => l.includes(stored!.key_id));
      assert.ok(row, listed.stdout);
      assert.deepEqual(row.trim().split(/\s+/).filter((_, i) => [0, 1, 2, 5].includes(i)), [stored!.key_id, 'automation', stored!.display_prefix, '-']);

      const ask = async (app: App) => (await manage(app, key, 'GET', `${m.base}/team?limit=1`)).statusCode;
      for (const app of [appA, appB]) assert.equal(await ask(app), 200, 'both instances have the key cached');
      const revoked = await runHds(['management-keys', 'revoke', stored!.key_id]);
      assert.equal(revoked.code, 0, describeRun(revoked));
      await refusedWithinOneSecond([appA, appB], ask, Date.now(), 'revoked management key');
      const after = await runHds(['management-keys', 'list']);
      assert.notEqual(stdoutLines(after).find((l) => l.includes(stored!.key_id))!.trim().split(/\s+/)[5], '-');
    });

    it('a management key revoked in the database is refused within a second by two instances that had it cached', async () => {
      const other = await managementKey(sql, 'revoked in the database');
      const ask = async (app: App) => (await manage(app, other.key, 'GET', other.base)).statusCode;
      for (const app of [appA, appB]) assert.equal(await ask(app), 200);
      assert.ok(await revokeManagementKey(sql, other.keyId));
      await refusedWithinOneSecond([appA, appB], ask, Date.now(), 'revoked management key');
      assert.equal(await ask(appB), 401);
      assert.equal((await manage(appB, m.key, 'GET', m.base)).statusCode, 200, 'the other management keys still work');
    });

    it('hds org prints the org id on its last line, the one the API answers', async () => {
      const run = await runHds(['org']);
      assert.equal(run.code, 0, describeRun(run));
      assert.equal(stdoutLines(run).at(-1), m.orgId);
      assert.equal((await manage(appA, m.key, 'GET', m.base)).json().id, m.orgId);
    });

    it('--help and wrong usage of the new commands', async () => {
      for (const command of [['management-keys', 'create'], ['management-keys', 'list'], ['management-keys', 'revoke'], ['org']]) {
        const help = await runHds([...command, '--help']);
        assert.equal(help.code, 0, describeRun(help));
        assert.ok(help.stdout.includes(command.join(' ')), help.stdout);
      }
      for (const wrong of [['management-keys', 'revoke'], ['management-keys', 'revoke', 'nope'], ['management-keys', 'revoke', randomUUID()],
        ['management-keys', 'create', '--team', 'x'], ['org', 'extra']]) {
        const r = await runHds(wrong);
        assert.equal(r.code, 2, `${wrong.join(' ')}: ${describeRun(r)}`);
        assert.equal(r.stdout, '');
      }
    });

    it('the first start prints a management key, the org id and a curl line that lists the teams, beside the demo team\'s key', async () => {
      const demo = await seedDemo(sql);
      assert.match(demo.managementKey, MANAGEMENT_KEY);
      assert.equal(demo.orgId, m.orgId);
      const written: string[] = [];
      const said: string[] = [];
      const write = process.stdout.write;
      // Synchronous: nothing else writes to standard output meanwhile.
      process.stdout.write = ((chunk: string) => written.push(String(chunk)) > 0) as typeof process.stdout.write;
      try {
        announceDemo(demo, 8000, (msg) => said.push(msg));
      } finally {
        process.stdout.write = write;
      }
      const curls = written.join('').split('\n').filter(Boolean);
      assert.equal(curls.length, 2, 'standard output: the two curl lines alone');
      assert.ok(curls[0]!.includes(`x-service-api-key: ${demo.key}`), curls[0]);
      const teams = /^curl -s -H 'x-management-key: (hdsm_[A-Za-z0-9_-]{43})' 'http:\/\/127\.0\.0\.1:8000(\/v1\/org\/[0-9a-f-]{36}\/team)'$/.exec(curls[1]!);
      assert.ok(teams, curls[1]);
      assert.equal(teams[1], demo.managementKey);
      assert.ok(said.some((line) => line.includes(demo.orgId)), 'the org id is said');
      assert.ok(!said.join('\n').includes(demo.managementKey), 'the key only in the curl line');
      const res = await manage(appA, teams[1]!, 'GET', teams[2]!);
      assert.equal(res.statusCode, 200, 'the printed curl line works');
      assert.equal((await manage(appA, demo.managementKey, 'GET', `${m.base}/team/${demo.teamId}`)).json().name, 'Demo team');
    });

    it('records a management key\'s last use in batches', async () => {
      const other = await managementKey(sql, 'last use');
      assert.equal((await manage(appA, other.key, 'GET', other.base)).statusCode, 200);
      await appA.managementVerifier.flushUses();
      const [row] = await sql<{ last_used_at: Date | null }[]>`SELECT last_used_at FROM management_keys WHERE key_id = ${other.keyId}`;
      assert.ok(row!.last_used_at instanceof Date);
    });
  });

  describe('team API keys', () => {
    it('POST issues a key shown once, which works on /v2/ for its team; GET lists it by its prefix only', async () => {
      const team = await teamWithKey(sql, 'keys over http');
      const res = await manage(appA, m.key, 'POST', keysPath(), { label: 'from automation', team_id: team.teamId });
      assert.equal(res.statusCode, 200, res.body);
      const issued = res.json();
      assert.deepEqual(Object.keys(issued), ['id', 'label', 'value', 'team_id', 'created_at']);
      assert.match(issued.id, UUID);
      assert.match(issued.value, TEAM_KEY);
      assert.deepEqual([issued.label, issued.team_id], ['from automation', team.teamId]);
      assert.match(issued.created_at, DATE_TIME);
      const created = await callAs(appA, issued.value, 'POST', '/v2/user/', { client_user_id: 'via-managed-key' });
      assert.equal(created.statusCode, 200);
      assert.equal(created.json().team_id, team.teamId);

      const listed = await manage(appA, m.key, 'GET', `${keysPath()}?team_id=${team.teamId}`);
      assert.equal(listed.statusCode, 200);
      const { api_keys, next_cursor } = listed.json();
      assert.equal(next_cursor, null);
      assert.deepEqual(api_keys.map((k: { id: string }) => k.id), [team.keyId, issued.id], 'oldest first');
      const shown = api_keys[1];
      assert.deepEqual({ ...shown, value: undefined }, { ...issued, value: undefined });
      assert.ok(issued.value.startsWith(shown.value) && shown.value.length === 10, `listed value ${shown.value}`);
      assert.ok(!listed.body.includes(issued.value) && !listed.body.includes(team.key), 'no key in the list');
      const [stored] = await sql<{ key_hash: Buffer }[]>`SELECT key_hash FROM api_keys WHERE key_id = ${issued.id}`;
      assert.equal(stored!.key_hash.length, 32);
    });

    it('every team\'s keys without team_id; pages by cursor; 404 for an unknown team; 422 for bad values', async () => {
      const team = await teamWithKey(sql, 'many keys');
      for (let i = 0; i < 6; i++) assert.equal((await manage(appA, m.key, 'POST', keysPath(), { label: `k${i}`, team_id: team.teamId })).statusCode, 200);
      const pages = await allPages(appA, m.key, `${keysPath()}?team_id=${team.teamId}&limit=3`);
      assert.deepEqual(pages.map((p) => p.api_keys.length), [3, 3, 1]);
      assert.deepEqual(pages.flatMap((p) => p.api_keys.map((k: { label: string }) => k.label)), ['test key', 'k0', 'k1', 'k2', 'k3', 'k4', 'k5']);
      const all = (await allPages(appA, m.key, `${keysPath()}?limit=250`)).flatMap((p) => p.api_keys.map((k: { id: string }) => k.id));
      assert.ok(all.includes(team.keyId), 'the org-wide list has every team\'s keys');
      assert.equal(new Set(all).size, all.length);

      const unknown = await manage(appA, m.key, 'GET', `${keysPath()}?team_id=${randomUUID()}`);
      assert.deepEqual([unknown.statusCode, unknown.json()], [404, { detail: 'Team not found' }]);
      assert.equal((await manage(appA, m.key, 'GET', `${keysPath()}?team_id=nope`)).statusCode, 422);
      const noTeam = await manage(appA, m.key, 'POST', keysPath(), { label: 'x', team_id: randomUUID() });
      assert.deepEqual([noTeam.statusCode, noTeam.json()], [404, { detail: 'Team not found' }]);
      for (const body of [{ team_id: team.teamId }, { label: '', team_id: team.teamId }, { label: 'x' }, { label: 'x', team_id: 'nope' }]) {
        assert.equal((await manage(appA, m.key, 'POST', keysPath(), body)).statusCode, 422, JSON.stringify(body));
      }
    });

    it('DELETE revokes several at once: success, failure and not_found; they are refused within a second on both instances', async () => {
      const team = await teamWithKey(sql, 'revocations');
      const second = (await manage(appA, m.key, 'POST', keysPath(), { label: 'second', team_id: team.teamId })).json();
      const spare = (await manage(appA, m.key, 'POST', keysPath(), { label: 'spare', team_id: team.teamId })).json();
      const ask = (key: string) => async (app: App) => (await callAs(app, key, 'GET', '/v2/user/?limit=1')).statusCode;
      for (const app of [appA, appB]) for (const key of [team.key, second.value]) assert.equal(await ask(key)(app), 200);
      const unknownId = randomUUID();
      const res = await manage(appA, m.key, 'DELETE', `${keysPath()}?api_key_id=${team.keyId}&api_key_id=${second.id}&api_key_id=${unknownId}&api_key_id=${second.id}`);
      const revokedAt = Date.now();
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { success: [team.keyId, second.id], failure: [], not_found: [unknownId] });
      await Promise.all([team.key, second.value].map((key) => refusedWithinOneSecond([appA, appB], ask(key), revokedAt, 'revoked team key')));
      assert.equal(await ask(spare.value)(appB), 200, 'the team\'s other key still works');
      const listed = (await manage(appA, m.key, 'GET', `${keysPath()}?team_id=${team.teamId}`)).json();
      assert.deepEqual(listed.api_keys.map((k: { id: string }) => k.id), [spare.id], 'revoked keys are not listed');
      // Revoked already: not found (no key that works has this id). One id alone is a list of one.
      const again = await manage(appA, m.key, 'DELETE', `${keysPath()}?api_key_id=${second.id}`);
      assert.deepEqual(again.json(), { success: [], failure: [], not_found: [second.id] });
    });

    it('DELETE without an id, with a malformed one or with more than 100 is a 422, and revokes nothing', async () => {
      const team = await teamWithKey(sql, 'bad revocations');
      const many = Array.from({ length: 101 }, () => `api_key_id=${randomUUID()}`).join('&');
      for (const query of ['', `?api_key_id=${team.keyId}&api_key_id=nope`, `?${many}`, `?api_key_id=${team.keyId}x`]) {
        const res = await manage(appA, m.key, 'DELETE', `${keysPath()}${query}`);
        assert.equal(res.statusCode, 422, query.slice(0, 80));
        assert.equal(res.json().detail[0].loc[1], 'api_key_id');
      }
      assert.equal((await callAs(appA, team.key, 'GET', '/v2/user/')).statusCode, 200);
    });
  });

  describe('one implementation behind the CLI and the routes', () => {
    it('a team the CLI creates is the API\'s; a key the API issues is in `hds keys list`; one the CLI revokes is not listed', async () => {
      const name = `cli-${randomUUID().slice(0, 8)}`;
      const created = await runHds(['teams', 'create', '--name', name]);
      assert.equal(created.code, 0, describeRun(created));
      const teamId = stdoutLines(created).at(-1)!;
      const team = await manage(appA, m.key, 'GET', `${m.base}/team/${teamId}`);
      assert.deepEqual([team.statusCode, team.json().name, team.json().integration_team_id], [200, name, null]);

      const issued = (await manage(appA, m.key, 'POST', keysPath(), { label: 'api-issued', team_id: teamId })).json();
      const listed = await runHds(['keys', 'list', '--team', teamId]);
      const row = stdoutLines(listed).find((l) => l.includes(issued.id));
      assert.ok(row, listed.stdout);
      assert.deepEqual(row.trim().split(/\s+/).slice(0, 3), [issued.id, 'api-issued', issued.value.slice(0, 10)]);
      assert.equal((await runHds(['keys', 'revoke', issued.id])).code, 0);
      const after = (await manage(appA, m.key, 'GET', `${keysPath()}?team_id=${teamId}`)).json();
      assert.deepEqual(after.api_keys, []);
    });
  });

  describe('logs', () => {
    it('every management action is logged with the key\'s id, never the key, a secret or a header value', async () => {
      const { app, lines } = await loggedApp(sql);
      try {
        const team = (await manage(app, m.key, 'POST', `${m.base}/team`, { name: 'logged' })).json();
        const key = (await manage(app, m.key, 'POST', keysPath(), { label: 'logged', team_id: team.id })).json();
        const webhook = (await manage(app, m.key, 'POST', `${m.base}/team/${team.id}/production/webhook`, { url: 'https://93.184.216.34/logged' })).json();
        await manage(app, m.key, 'PUT', `${m.base}/team/${team.id}/production/webhook/${webhook.id}/headers`, { headers: { authorization: 'Bearer header-value-never-logged' } });
        const secret = (await manage(app, m.key, 'GET', `${m.base}/team/${team.id}/production/webhook/${webhook.id}/secret`)).json().key;
        await manage(app, m.key, 'GET', `${m.base}/team/${randomUUID()}`);
        await manage(app, m.key, 'DELETE', `${keysPath()}?api_key_id=${key.id}`);
        await app.inject({ url: `${m.base}/team`, headers: { 'x-management-key': `hdsm_${randomBytes(32).toString('base64url')}` } });
        const actions = lines().filter((l) => l.msg === 'management action');
        assert.deepEqual(actions.map((l) => [l.action, l.status]), [
          ['createTeam', 200], ['createTeamApiKey', 200], ['createWebhook', 200], ['putWebhookHeaders', 204],
          ['getWebhookSecret', 200], ['getTeam', 404], ['deleteTeamApiKeys', 200],
        ], 'one line per action of a verified key, none for the refused key');
        for (const l of actions) {
          assert.equal(l.management_key_id, m.keyId);
          assert.equal(typeof l.request_id, 'string');
        }
        assert.equal(actions[0]!.team_id, team.id);
        assert.deepEqual([actions[1]!.team_id, actions[1]!.api_key_id], [team.id, key.id]);
        assert.equal(actions[2]!.webhook_id, webhook.id);
        assert.deepEqual(actions[6]!.api_key_ids, [key.id]);
        const text = JSON.stringify(lines());
        for (const secretValue of [m.key, key.value, secret, 'header-value-never-logged', 'https://93.184.216.34/logged']) {
          assert.ok(!text.includes(secretValue), `${secretValue.slice(0, 8)}… reached the log`);
        }
      } finally {
        await app.close();
      }
    });
  });

  describe('the failed-authentication budget covers management keys', () => {
    it('bad management keys use up the address\'s budget: then a valid key gets 429 too, on both APIs', async () => {
      const app = await testApp(sql, { AUTH_FAILURES_PER_IP: '3', RATE_LIMIT_PER_IP: '1000', RATE_LIMIT_PER_TEAM: '1000' });
      try {
        const team = await teamWithKey(sql);
        assert.equal((await manage(app, m.key, 'GET', m.base)).statusCode, 200);
        for (let i = 0; i < 3; i++) {
          const res = await manage(app, `hdsm_${randomBytes(32).toString('base64url')}`, 'GET', m.base);
          assert.equal(res.statusCode, 401);
        }
        const refused = await manage(app, m.key, 'GET', m.base);
        assert.equal(refused.statusCode, 429);
        assert.deepEqual(refused.json(), { detail: 'Rate limit exceeded' });
        assert.ok(Number(refused.headers['retry-after']) >= 1);
        assert.equal((await callAs(app, team.key, 'GET', '/v2/user/')).statusCode, 429);
      } finally {
        await app.close();
      }
    });
  });
});

/**
 * The Management API's organisation and teams (contract section 11): every
 * route's success and the errors it names, cursor paging over more teams
 * than one page, opaque cursors, the deployment's own org, environment and
 * region, and a team deleted with its keys and endpoints.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { insertTeam } from '../src/teams/team-store.js';
import { callAs, teamWithKey, testApp, testSql } from './helpers.js';
import { allPages, DATE_TIME, manage, managementKey, UUID, type Management } from './management-helpers.js';

describe('Management API: organisation and teams', () => {
  let sql: Sql;
  let app: App;
  let m: Management;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    m = await managementKey(sql);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const call = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, payload?: object) =>
    manage(app, m.key, method, `${m.base}${path}`, payload);

  it('GET the org: its id, name and creation time, the same as the org table', async () => {
    const res = await manage(app, m.key, 'GET', m.base);
    assert.equal(res.statusCode, 200);
    const [row] = await sql<{ org_id: string; name: string }[]>`SELECT org_id, name FROM org`;
    assert.deepEqual(Object.keys(res.json()), ['id', 'name', 'created_on']);
    assert.equal(res.json().id, row!.org_id);
    assert.equal(res.json().name, row!.name);
    assert.match(res.json().created_on, DATE_TIME);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(String(res.headers['content-type']), /^application\/json/);
  });

  it('POST a team: 200 with the team, in the deployment\'s region; the same row the CLI writes', async () => {
    const res = await call('POST', '/team', { name: 'Acme Health', unknown_field: 1 });
    assert.equal(res.statusCode, 200, res.body);
    const team = res.json();
    assert.deepEqual(Object.keys(team), ['id', 'name', 'created_on', 'region', 'integration_team_id']);
    assert.match(team.id, UUID);
    assert.deepEqual([team.name, team.region, team.integration_team_id], ['Acme Health', 'us', null]);
    assert.match(team.created_on, DATE_TIME);
    const [row] = await sql`SELECT name, user_count FROM teams WHERE team_id = ${team.id}`;
    assert.deepEqual({ ...row }, { name: 'Acme Health', user_count: '0' });

    const withId = await call('POST', '/team', { name: 'With id', integration_team_id: 'crm-7', region: 'us' });
    assert.equal(withId.json().integration_team_id, 'crm-7');
  });

  it('POST a team: 422 for a missing or empty name, another region, a body that is not an object', async () => {
    const cases: [object | string, string[]][] = [
      [{}, ['body', 'name']],
      [{ name: '' }, ['body', 'name']],
      [{ name: 'x'.repeat(256) }, ['body', 'name']],
      [{ name: 'x', region: 'eu' }, ['body', 'region']],
      [{ name: 'x', region: 'mars' }, ['body', 'region']],
      [[{ name: 'x' }], ['body']],
    ];
    for (const [payload, loc] of cases) {
      const res = await app.inject({ method: 'POST', url: `${m.base}/team`, headers: { 'x-management-key': m.key, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
      assert.equal(res.statusCode, 422, JSON.stringify(payload));
      assert.deepEqual(res.json().detail[0].loc, loc, JSON.stringify(payload));
    }
  });

  it('GET a team; 404 for an unknown one, 422 for a malformed id', async () => {
    const created = (await call('POST', '/team', { name: 'Get me' })).json();
    const res = await call('GET', `/team/${created.id}`);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), created);
    const unknown = await call('GET', `/team/${randomUUID()}`);
    assert.equal(unknown.statusCode, 404);
    assert.deepEqual(unknown.json(), { detail: 'Team not found' });
    const malformed = await call('GET', '/team/not-a-uuid');
    assert.equal(malformed.statusCode, 422);
    assert.deepEqual(malformed.json().detail[0].loc, ['path', 'team_id']);
  });

  it('PATCH a team: the fields given; null clears integration_team_id; nothing to change answers the team', async () => {
    const team = (await call('POST', '/team', { name: 'Before' })).json();
    const renamed = await call('PATCH', `/team/${team.id}`, { name: 'After', integration_team_id: 'ext-1' });
    assert.equal(renamed.statusCode, 200);
    assert.deepEqual(renamed.json(), { ...team, name: 'After', integration_team_id: 'ext-1' });
    const cleared = await call('PATCH', `/team/${team.id}`, { integration_team_id: null });
    assert.deepEqual(cleared.json(), { ...team, name: 'After', integration_team_id: null });
    const unchanged = await call('PATCH', `/team/${team.id}`, {});
    assert.equal(unchanged.statusCode, 200);
    assert.deepEqual(unchanged.json(), cleared.json());
    assert.deepEqual((await call('GET', `/team/${team.id}`)).json(), cleared.json());

    const missing = await call('PATCH', `/team/${randomUUID()}`, { name: 'x' });
    assert.deepEqual([missing.statusCode, missing.json()], [404, { detail: 'Team not found' }]);
    const bad = await call('PATCH', `/team/${team.id}`, { name: 7 });
    assert.equal(bad.statusCode, 422);
    assert.deepEqual(bad.json().detail[0].loc, ['body', 'name']);
  });

  describe('list', () => {
    const prefix = `paging-${randomUUID().slice(0, 8)}`;
    let ours: string[];

    before(async () => {
      // More teams than a page of the largest size (250), created as the API creates them.
      ours = [];
      for (let i = 0; i < 260; i++) ours.push((await insertTeam(sql, { name: `${prefix} ${String(i).padStart(3, '0')}` })).id);
    });

    it('pages through more teams than one page by cursor: every team once, oldest first, null at the end', async () => {
      const pages = await allPages(app, m.key, `${m.base}/team?search_query=${prefix}&limit=100`);
      assert.equal(pages.length, 3);
      assert.deepEqual(pages.map((p) => p.teams.length), [100, 100, 60]);
      assert.equal(pages.at(-1)!.next_cursor, null);
      const ids = pages.flatMap((p) => p.teams.map((t: { id: string }) => t.id));
      const [order] = await sql<{ ids: string[] }[]>`
        SELECT array_agg(team_id::text ORDER BY created_at, team_id) AS ids FROM teams WHERE team_id = ANY(${ours}::uuid[])`;
      assert.deepEqual(ids, order!.ids);
      for (const p of pages) for (const t of p.teams) assert.equal(t.region, 'us');
    });

    it('pages the whole list with the default and the largest page sizes, each team once', async () => {
      for (const limit of ['', '&limit=250']) {
        const pages = await allPages(app, m.key, `${m.base}/team?${limit}`);
        const ids = pages.flatMap((p) => p.teams.map((t: { id: string }) => t.id));
        assert.equal(new Set(ids).size, ids.length, 'no team twice');
        for (const id of ours) assert.ok(ids.includes(id), `team ${id} listed`);
        assert.ok(pages.slice(0, -1).every((p) => p.teams.length === (limit ? 250 : 50)));
      }
    });

    it('search_query: by name (any case, as text: % and _ are not wildcards), or by id', async () => {
      const one = await call('GET', `/team?search_query=${encodeURIComponent(`${prefix.toUpperCase()} 007`)}`);
      assert.deepEqual(one.json().teams.map((t: { name: string }) => t.name), [`${prefix} 007`]);
      const byId = await call('GET', `/team?search_query=${ours[5]}`);
      assert.deepEqual(byId.json().teams.map((t: { id: string }) => t.id), [ours[5]]);
      const wildcard = await call('GET', `/team?search_query=${encodeURIComponent(`${prefix} 0%`)}`);
      assert.deepEqual(wildcard.json(), { teams: [], next_cursor: null });
      const none = await call('GET', `/team?search_query=${randomUUID()}`);
      assert.deepEqual(none.json(), { teams: [], next_cursor: null });
    });

    it('a cursor altered, made by another list, or not a cursor at all is a 422 at next_cursor, never a 500', async () => {
      const first = (await call('GET', `/team?search_query=${prefix}&limit=10`)).json();
      const cursor = first.next_cursor as string;
      assert.equal(typeof cursor, 'string');
      const [payload, mac] = cursor.split('.') as [string, string];
      const decoded = Buffer.from(payload, 'base64url').toString();
      const forged = Buffer.from(decoded.replace(/[0-9a-f](?=[0-9a-f-]*"\]$)/, (c) => (c === '0' ? '1' : '0'))).toString('base64url');
      const bad = [
        `${forged}.${mac}`,
        // Its first character changed (the last ones could already be what a fixed ending would write).
        `${payload}.${mac[0] === 'A' ? 'B' : 'A'}${mac.slice(1)}`,
        `${payload}x.${mac}`,
        payload,
        'not-a-cursor',
        '.',
        Buffer.from('["2020-01-01T00:00:00+00:00","00000000-0000-4000-8000-000000000000"]').toString('base64url'),
        'x'.repeat(512),
      ];
      for (const c of bad) {
        const res = await call('GET', `/team?search_query=${prefix}&next_cursor=${encodeURIComponent(c)}`);
        assert.equal(res.statusCode, 422, c);
        assert.deepEqual(res.json().detail[0].loc, ['query', 'next_cursor'], c);
      }
      // The same cursor on another list: without the search, with another search, on a team's webhooks.
      for (const url of [`/team?next_cursor=${encodeURIComponent(cursor)}`, `/team?search_query=other&next_cursor=${encodeURIComponent(cursor)}`,
        `/team/${ours[0]}/production/webhook?next_cursor=${encodeURIComponent(cursor)}`,
        `/team_api_keys/production/us?next_cursor=${encodeURIComponent(cursor)}`]) {
        const res = await call('GET', url);
        assert.equal(res.statusCode, 422, url);
        assert.equal(res.json().detail[0].msg, 'Value error, next_cursor was not made by this list');
      }
      const tooLong = await call('GET', `/team?next_cursor=${'x'.repeat(513)}`);
      assert.equal(tooLong.statusCode, 422);
      // The genuine cursor still works.
      assert.equal((await call('GET', `/team?search_query=${prefix}&limit=10&next_cursor=${encodeURIComponent(cursor)}`)).statusCode, 200);
    });

    it('limit outside 1..250, or not a plain integer, is a 422', async () => {
      for (const limit of ['0', '251', '-1', '1e2', 'ten', '']) {
        const res = await call('GET', `/team?limit=${limit}`);
        assert.equal(res.statusCode, 422, limit);
        assert.deepEqual(res.json().detail[0].loc, ['query', 'limit'], limit);
      }
    });
  });

  describe('delete', () => {
    it('deletes a team without users, with its keys (refused at once by an instance that never saw them) and its endpoints', async () => {
      const team = await teamWithKey(sql, 'to delete');
      assert.equal((await callAs(app, team.key, 'GET', '/v2/user/')).statusCode, 200);
      const webhook = await call('POST', `/team/${team.teamId}/production/webhook`, { url: 'https://93.184.216.34/hook' });
      assert.equal(webhook.statusCode, 200, webhook.body);
      const res = await call('DELETE', `/team/${team.teamId}`);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), {});
      assert.equal((await call('GET', `/team/${team.teamId}`)).statusCode, 404);
      const fresh = await testApp(sql);
      try {
        assert.equal((await callAs(fresh, team.key, 'GET', '/v2/user/')).statusCode, 401);
      } finally {
        await fresh.close();
      }
      const left = await sql`
        SELECT (SELECT count(*) FROM api_keys WHERE team_id = ${team.teamId}) AS keys,
               (SELECT count(*) FROM webhook_endpoints WHERE team_id = ${team.teamId}) AS endpoints,
               (SELECT count(*) FROM webhook_secrets WHERE endpoint_id = ${webhook.json().id}) AS secrets`;
      assert.deepEqual({ ...left[0] }, { keys: '0', endpoints: '0', secrets: '0' });
      const again = await call('DELETE', `/team/${team.teamId}`);
      assert.deepEqual([again.statusCode, again.json()], [404, { detail: 'Team not found' }]);
    });

    it('409 while the team has a live user, and while it has one scheduled for deletion; nothing is deleted', async () => {
      const team = await teamWithKey(sql, 'with users');
      const created = await callAs(app, team.key, 'POST', '/v2/user/', { client_user_id: 'keeps-the-team' });
      assert.equal(created.statusCode, 200);
      const live = await call('DELETE', `/team/${team.teamId}`);
      assert.equal(live.statusCode, 409);
      assert.match(live.json().detail, /users/);
      assert.equal((await callAs(app, team.key, 'DELETE', `/v2/user/${created.json().user_id}`)).statusCode, 200);
      const scheduled = await call('DELETE', `/team/${team.teamId}`);
      assert.equal(scheduled.statusCode, 409);
      assert.equal((await call('GET', `/team/${team.teamId}`)).statusCode, 200);
      assert.equal((await callAs(app, team.key, 'GET', '/v2/user/')).statusCode, 200, 'its key still works');
    });

    it('a team whose users were all purged can be deleted', async () => {
      const team = await teamWithKey(sql, 'purged');
      const created = await callAs(app, team.key, 'POST', '/v2/user/', { client_user_id: 'purged-1' });
      await callAs(app, team.key, 'DELETE', `/v2/user/${created.json().user_id}`);
      await sql`DELETE FROM deleted_users WHERE team_id = ${team.teamId}`;
      const res = await call('DELETE', `/team/${team.teamId}`);
      assert.equal(res.statusCode, 200, res.body);
      const left = await sql`SELECT (SELECT count(*) FROM list_holes WHERE team_id = ${team.teamId}) AS holes,
        (SELECT count(*) FROM list_hole_blocks WHERE team_id = ${team.teamId}) AS blocks,
        (SELECT count(*) FROM list_hole_teams WHERE team_id = ${team.teamId}) AS teams`;
      assert.deepEqual({ ...left[0] }, { holes: '0', blocks: '0', teams: '0' });
    });
  });

  describe('the deployment\'s own org, environment and region', () => {
    let other: App;
    before(async () => {
      other = await testApp(sql, { ENVIRONMENT: 'sandbox', REGION: 'eu' });
    });
    after(async () => other.close());

    it('a path naming another org is a 404 Not Found, on every route', async () => {
      const team = (await call('POST', '/team', { name: 'mine' })).json();
      const otherOrg = `/v1/org/${randomUUID()}`;
      for (const [method, path, body] of [
        ['GET', '', undefined], ['GET', '/team', undefined], ['POST', '/team', { name: 'x' }], ['GET', `/team/${team.id}`, undefined],
        ['PATCH', `/team/${team.id}`, { name: 'x' }], ['DELETE', `/team/${team.id}`, undefined],
        ['GET', '/team_api_keys/production/us', undefined], ['POST', '/team_api_keys/production/us', { label: 'x', team_id: team.id }],
        ['GET', `/team/${team.id}/production/webhook`, undefined],
      ] as const) {
        const res = await manage(app, m.key, method, `${otherOrg}${path}`, body);
        assert.equal(res.statusCode, 404, `${method} ${path}`);
        assert.deepEqual(res.json(), { detail: 'Not Found' });
      }
      assert.equal((await call('GET', `/team/${team.id}`)).json().name, 'mine', 'nothing was changed');
      assert.equal((await sql`SELECT 1 FROM api_keys WHERE team_id = ${team.id}`).length, 0, 'no key was issued');
    });

    it('another environment or region is a 404; a value outside the upstream\'s enums a 422', async () => {
      const team = (await call('POST', '/team', { name: 'env' })).json();
      for (const path of ['/team_api_keys/sandbox/us', '/team_api_keys/production/eu', `/team/${team.id}/sandbox/webhook`]) {
        const res = await call('GET', path);
        assert.deepEqual([res.statusCode, res.json()], [404, { detail: 'Not Found' }], path);
      }
      for (const [path, loc] of [['/team_api_keys/staging/us', 'env'], ['/team_api_keys/production/ap', 'region'], [`/team/${team.id}/dev/webhook`, 'environment']]) {
        const res = await call('GET', path!);
        assert.equal(res.statusCode, 422, path);
        assert.equal(res.json().detail[0].type, 'enum');
        assert.deepEqual(res.json().detail[0].loc, ['path', loc]);
      }
      // A deployment configured as sandbox in eu serves those, and names its region on teams.
      assert.equal((await manage(other, m.key, 'GET', `${m.base}/team_api_keys/sandbox/eu`)).statusCode, 200);
      assert.equal((await manage(other, m.key, 'GET', `${m.base}/team_api_keys/production/us`)).statusCode, 404);
      assert.equal((await manage(other, m.key, 'GET', `${m.base}/team/${team.id}`)).json().region, 'eu');
      assert.equal((await manage(other, m.key, 'POST', `${m.base}/team`, { name: 'x', region: 'us' })).statusCode, 422);
    });

    it('a malformed org id is a 422, a path parameter too long to be valid a 414 that does not echo it', async () => {
      const malformed = await manage(app, m.key, 'GET', '/v1/org/not-an-org/team');
      assert.equal(malformed.statusCode, 422);
      assert.deepEqual(malformed.json().detail[0].loc, ['path', 'org_id']);
      const long = `a${'b'.repeat(100)}`;
      const res = await manage(app, m.key, 'GET', `/v1/org/${long}/team`);
      assert.equal(res.statusCode, 414);
      assert.ok(!res.body.includes(long));
      // Before the key is checked, as on the user routes.
      assert.equal((await app.inject({ url: `/v1/org/${long}/team` })).statusCode, 414);
    });

    it('any other method on a management path is a 405 with Allow, before the key is checked', async () => {
      const res = await app.inject({ method: 'PUT', url: `${m.base}/team` });
      assert.equal(res.statusCode, 405);
      assert.deepEqual(res.json(), { detail: 'Method Not Allowed' });
      assert.equal(res.headers.allow, 'GET, HEAD, POST');
      const rotate = await app.inject({ method: 'GET', url: `${m.base}/team/${randomUUID()}/production/webhook/${randomUUID()}/secret/rotate` });
      assert.deepEqual([rotate.statusCode, rotate.headers.allow], [405, 'POST']);
      const head = await manage(app, m.key, 'GET', `${m.base}/team`);
      assert.equal(head.statusCode, 200);
      const headOnly = await app.inject({ method: 'HEAD', url: `${m.base}/team`, headers: { 'x-management-key': m.key } });
      assert.deepEqual([headOnly.statusCode, headOnly.body], [200, '']);
    });
  });
});

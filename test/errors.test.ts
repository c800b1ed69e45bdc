/**
 * The error table of contract.md section 6 (401, 404, 405, 422) on every
 * route it applies to, and the headers of section 7. The 429, 500 and 503
 * rows have their own tests (rate limits, faults).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { generateKey } from '../src/auth/api-key.js';
import { issueKey } from '../src/auth/issue-key.js';
import { revokeKey } from '../src/auth/key-store.js';
import { comparableHeaders, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
interface Route { name: string; method: Method; url: string; payload?: object }

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const REQUEST_ID = 'errors-test.req:1';

function assertJson(res: LightMyRequestResponse): void {
  assert.match(String(res.headers['content-type']), /^application\/json(;|$)/, `content-type of a ${res.statusCode}`);
}

function assertValidationError(res: LightMyRequestResponse, locs: (string | number)[][]): void {
  assert.equal(res.statusCode, 422, res.body);
  assertJson(res);
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['detail']);
  assert.ok(Array.isArray(body.detail));
  for (const item of body.detail) {
    assert.equal(typeof item.type, 'string');
    assert.equal(typeof item.msg, 'string');
    assert.ok('input' in item, 'every item carries input');
    assert.ok(['path', 'query', 'header', 'body'].includes(item.loc[0]), `loc ${JSON.stringify(item.loc)}`);
  }
  const sortLocs = (l: (string | number)[][]) => l.map((x) => JSON.stringify(x)).sort();
  assert.deepEqual(sortLocs(body.detail.map((i: { loc: (string | number)[] }) => i.loc)), sortLocs(locs), res.body);
}

describe('errors and headers (contract sections 6 and 7)', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;
  let badKeys: Record<string, string | undefined>;
  let routes: Route[];
  let user: Record<string, any>;

  before(async () => {
    sql = testSql();
    team = await teamWithUsers(sql, 5);
    other = await teamWithUsers(sql, 2);
    user = team.users[0]!;
    const revoked = await issueKey(sql, team.teamId, 'revoked');
    await revokeKey(sql, revoked.keyId);
    const expired = await issueKey(sql, team.teamId, 'expired', new Date(Date.now() - 1000));
    // Built after the revocation: the key cache has never seen these keys.
    app = await testApp(sql);
    badKeys = {
      missing: undefined,
      malformed: 'not-a-key',
      unknown: generateKey().key,
      revoked: revoked.key,
      expired: expired.key,
    };
    routes = [
      { name: 'GET list', method: 'GET', url: '/v2/user/' },
      { name: 'GET list without slash', method: 'GET', url: '/v2/user' },
      { name: 'GET one', method: 'GET', url: `/v2/user/${user.user_id}` },
      { name: 'GET resolve', method: 'GET', url: `/v2/user/resolve/${encodeURIComponent(user.client_user_id)}` },
      { name: 'POST create', method: 'POST', url: '/v2/user/', payload: { client_user_id: `unauthorised-${randomUUID()}` } },
      { name: 'HEAD one', method: 'HEAD', url: `/v2/user/${user.user_id}` },
    ];
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const send = (route: Route, key: string | undefined, headers: Record<string, string> = {}) =>
    app.inject({
      method: route.method, url: route.url, payload: route.payload,
      headers: { 'x-request-id': REQUEST_ID, ...(key === undefined ? {} : { 'x-service-api-key': key }), ...headers },
    });
  const get = (url: string, headers: Record<string, string> = {}) =>
    app.inject({ url, headers: { 'x-service-api-key': team.key, ...headers } });

  describe('401', () => {
    it('missing, malformed, unknown, revoked and expired keys get the same 401 on every route', async () => {
      for (const route of routes) {
        const answers: [string, LightMyRequestResponse][] = [];
        for (const [kind, key] of Object.entries(badKeys)) answers.push([kind, await send(route, key)]);
        const [, first] = answers[0]!;
        for (const [kind, res] of answers) {
          const what = `${route.name}, ${kind} key`;
          assert.equal(res.statusCode, 401, what);
          assertJson(res);
          assert.ok(res.headers['www-authenticate'], `${what}: WWW-Authenticate`);
          if (route.method === 'HEAD') assert.equal(res.body, '', what);
          else assert.equal(typeof res.json().detail, 'string', what);
          assert.equal(res.body, first.body, `${what}: body differs from a missing key's`);
          assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(first.headers), `${what}: headers differ from a missing key's`);
        }
      }
      const created = await sql`SELECT 1 FROM users WHERE team_id = ${team.teamId} AND client_user_id LIKE 'unauthorised-%'`;
      assert.equal(created.length, 0, 'a refused POST created a user');
    });

    it('the same 401 for other malformed values and for a good key in a header of neither name', async () => {
      const reference = await send(routes[0]!, undefined);
      const variants: Record<string, string>[] = [
        { 'x-service-api-key': '' },
        { 'x-service-api-key': team.key.slice(0, -1) },
        { 'x-service-api-key': `${team.key}x` },
        { 'x-service-api-key': ` ${team.key}x` },
        { 'x-service-api-key': `Bearer ${team.key}` },
        { authorization: `Bearer ${team.key}` },
        { 'x-api-key': team.key },
        // x-service-api-key wins when both are sent, even a bad one.
        { 'x-service-api-key': 'not-a-key', 'x-vital-api-key': team.key },
      ];
      for (const headers of variants) {
        const res = await app.inject({ url: '/v2/user/', headers: { 'x-request-id': REQUEST_ID, ...headers } });
        assert.equal(res.statusCode, 401, JSON.stringify(headers));
        assert.equal(res.body, reference.body);
        assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(reference.headers));
      }
    });

    it("accepts the upstream's header x-vital-api-key, and x-service-api-key when both are sent", async () => {
      const upstream = await app.inject({ url: '/v2/user/?limit=1', headers: { 'x-vital-api-key': team.key } });
      assert.equal(upstream.statusCode, 200);
      assert.equal(upstream.json().total, (await get('/v2/user/?limit=1')).json().total);
      const both = await app.inject({ url: '/v2/user/?limit=1', headers: { 'x-service-api-key': team.key, 'x-vital-api-key': 'not-a-key' } });
      assert.equal(both.statusCode, 200);
    });

    it('never accepts a key in the query string', async () => {
      for (const name of ['x-service-api-key', 'x_service_api_key', 'api_key', 'apikey', 'key', 'token']) {
        const res = await app.inject({ url: `/v2/user/?${name}=${encodeURIComponent(team.key)}` });
        assert.equal(res.statusCode, 401, name);
        assert.ok(res.headers['www-authenticate']);
      }
    });

    it('reads the header name case-insensitively', async () => {
      const res = await app.inject({ url: '/v2/user/?limit=1', headers: { 'X-Service-Api-Key': team.key } });
      assert.equal(res.statusCode, 200);
    });

    it('comes before 404 and 422: a caller without a valid key learns nothing', async () => {
      const reference = await send(routes[0]!, undefined);
      const big = JSON.stringify({ client_user_id: 'x', pad: 'p'.repeat(20_000) });
      const probes: { what: string; method: Method; url: string; payload?: string | object; headers?: Record<string, string> }[] = [
        { what: 'unknown user', method: 'GET', url: `/v2/user/${randomUUID()}` },
        { what: "another team's user", method: 'GET', url: `/v2/user/${other.users[0]!.user_id}` },
        { what: 'malformed user_id', method: 'GET', url: '/v2/user/not-a-uuid' },
        { what: 'unknown client_user_id', method: 'GET', url: '/v2/user/resolve/nobody-here' },
        // One character longer is a 414 before the key, as the router's refusal of a longer path: its length says nothing about a user.
        { what: 'longest client_user_id', method: 'GET', url: `/v2/user/resolve/${'x'.repeat(255)}` },
        { what: 'bad limit', method: 'GET', url: '/v2/user/?limit=0&offset=-1' },
        { what: 'bad body', method: 'POST', url: '/v2/user/', payload: { client_user_id: '', extra: 1 } },
        { what: 'duplicate client_user_id', method: 'POST', url: '/v2/user/', payload: { client_user_id: user.client_user_id } },
        { what: 'non-JSON body', method: 'POST', url: '/v2/user/', payload: '{nope', headers: { 'content-type': 'application/json' } },
        { what: 'wrong content type', method: 'POST', url: '/v2/user/', payload: 'client_user_id=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        { what: 'body over 16 KiB', method: 'POST', url: '/v2/user/', payload: big, headers: { 'content-type': 'application/json' } },
      ];
      for (const [kind, key] of Object.entries(badKeys)) {
        for (const p of probes) {
          const res = await app.inject({
            method: p.method, url: p.url, payload: p.payload,
            headers: { 'x-request-id': REQUEST_ID, ...(key === undefined ? {} : { 'x-service-api-key': key }), ...p.headers },
          });
          assert.equal(res.statusCode, 401, `${p.what} with a ${kind} key: ${res.body}`);
          assert.equal(res.body, reference.body, p.what);
          assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(reference.headers), p.what);
        }
      }
    });
  });

  describe('404', () => {
    it('the same 404 for an unknown user and another team\'s: "Not found" by id, "User not found" by client_user_id', async () => {
      const cases = [
        [`/v2/user/${randomUUID()}`, '{"detail":"Not found"}'],
        [`/v2/user/${other.users[0]!.user_id}`, '{"detail":"Not found"}'],
        ['/v2/user/resolve/no-such-client-user', '{"detail":"User not found"}'],
        [`/v2/user/resolve/${encodeURIComponent(other.users[0]!.client_user_id)}`, '{"detail":"User not found"}'],
      ] as const;
      const answers = await Promise.all(cases.map(([url]) => get(url, { 'x-request-id': REQUEST_ID })));
      for (const [i, res] of answers.entries()) {
        const [url, body] = cases[i]!;
        assert.equal(res.statusCode, 404, url);
        assertJson(res);
        assert.equal(res.body, body, url);
        // The unknown user and the other team's, of each route: the same headers.
        assert.deepEqual(comparableHeaders(res.headers), comparableHeaders(answers[i - (i % 2)]!.headers), url);
      }
      const head = await app.inject({ method: 'HEAD', url: cases[1][0], headers: { 'x-service-api-key': team.key } });
      assert.equal(head.statusCode, 404);
      assert.equal(head.body, '');
    });

    it('Not Found for unknown paths, with or without a key', async () => {
      const paths = ['/', '/v2', '/v2/users', '/v1/user/', '/v3/user/', `/v2/user/${user.user_id}/sources/x`, '/v2/user/resolve/a/b', '/V2/USER/'];
      for (const path of paths) {
        for (const headers of [{}, { 'x-service-api-key': team.key }]) {
          for (const method of ['GET', 'POST'] as const) {
            const res = await app.inject({ method, url: path, headers });
            assert.equal(res.statusCode, 404, `${method} ${path}`);
            assertJson(res);
            assert.deepEqual(res.json(), { detail: 'Not Found' });
          }
        }
      }
    });
  });

  describe('405', () => {
    const cases: { url: () => string; allow: string[] }[] = [
      { url: () => '/v2/user/', allow: ['GET', 'HEAD', 'POST'] },
      { url: () => '/v2/user', allow: ['GET', 'HEAD', 'POST'] },
      { url: () => `/v2/user/${user.user_id}`, allow: ['GET', 'HEAD', 'PATCH', 'DELETE'] },
      { url: () => '/v2/user/not-a-uuid', allow: ['GET', 'HEAD', 'PATCH', 'DELETE'] },
      { url: () => `/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`, allow: ['GET', 'HEAD'] },
      { url: () => '/v2/user/metrics', allow: ['GET', 'HEAD'] },
      { url: () => `/v2/user/providers/${user.user_id}`, allow: ['GET', 'HEAD'] },
      { url: () => '/v2/user/undo_delete', allow: ['POST'] },
      { url: () => `/v2/user/${user.user_id}/oura`, allow: ['DELETE'] },
      { url: () => '/v2/team/users/search?query_id=abc', allow: ['GET', 'HEAD'] },
    ];
    const methods: Method[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

    it('answers every other method with 405 and an Allow header, whatever the key', async () => {
      for (const c of cases) {
        for (const method of methods.filter((m) => !c.allow.includes(m))) {
          for (const key of [team.key, undefined, 'not-a-key']) {
            const res = await app.inject({ method, url: c.url(), headers: key ? { 'x-service-api-key': key } : {} });
            const what = `${method} ${c.url()} (${key ? 'key' : 'no key'})`;
            assert.equal(res.statusCode, 405, what);
            assertJson(res);
            if (method !== 'HEAD') assert.deepEqual(res.json(), { detail: 'Method Not Allowed' }, what);
            const allow = String(res.headers.allow).split(',').map((m) => m.trim()).sort();
            assert.deepEqual(allow, [...c.allow].sort(), what);
          }
        }
      }
    });

    it('says the same for a user that exists and one that does not', async () => {
      const a = await app.inject({ method: 'PUT', url: `/v2/user/${user.user_id}`, headers: { 'x-request-id': REQUEST_ID } });
      const b = await app.inject({ method: 'PUT', url: `/v2/user/${randomUUID()}`, headers: { 'x-request-id': REQUEST_ID } });
      assert.equal(a.statusCode, 405);
      assert.equal(a.body, b.body);
      assert.deepEqual(comparableHeaders(a.headers), comparableHeaders(b.headers));
      const still = await get(`/v2/user/${user.user_id}`);
      assert.equal(still.statusCode, 200, 'PUT must not have changed anything');
    });
  });

  describe('422', () => {
    it('refuses bad offset and limit values, naming the parameter', async () => {
      const bad: [string, string][] = [
        ['limit', '501'], ['limit', '-1'], ['limit', 'abc'], ['limit', '1.5'], ['limit', ''],
        ['offset', '-1'], ['offset', 'abc'], ['offset', '2.5'], ['offset', '9007199254740992'],
        // What a lax number parser would take: not integers as the contract means them.
        ['limit', '0x10'], ['limit', '1e1'], ['limit', '+5'], ['limit', ' 5 '], ['offset', ' '], ['offset', '0b1'],
      ];
      for (const path of ['/v2/user/', '/v2/user']) {
        for (const [name, value] of bad) {
          const res = await get(`${path}?${name}=${encodeURIComponent(value)}`);
          assertValidationError(res, [['query', name]]);
          assert.equal(String(res.json().detail[0].input), value, `input echoes ${name}=${value}`);
        }
      }
    });

    it('lists every problem of a request', async () => {
      assertValidationError(await get('/v2/user/?offset=-5&limit=1000'), [['query', 'offset'], ['query', 'limit']]);
    });

    it('accepts the boundaries', async () => {
      for (const query of ['limit=1', 'limit=500', 'offset=0', 'offset=9007199254740991']) {
        assert.equal((await get(`/v2/user/?${query}`)).statusCode, 200, query);
      }
    });

    it('never answers 500 for repeated parameters', async () => {
      const res = await get('/v2/user/?limit=5&limit=6');
      assert.ok([200, 422].includes(res.statusCode), `${res.statusCode} ${res.body}`);
    });

    it('refuses a malformed user_id with loc ["path", "user_id"], never a database error', async () => {
      const malformed = ['abc', '123', 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz', user.user_id.slice(1),
        "'; DROP TABLE users; --", user.user_id.replace(/-/g, ' '), `urn:uuid:${user.user_id.slice(9)}`, `{${user.user_id.slice(2)}}`];
      for (const id of malformed) {
        const res = await get(`/v2/user/${encodeURIComponent(id)}`);
        assertValidationError(res, [['path', 'user_id']]);
        assert.equal(res.json().detail[0].input, id);
      }
      // Longer than any UUID: a 414 that does not echo it (test/hostile-input.test.ts).
      for (const id of [`${user.user_id}0`, `urn:uuid:${user.user_id}`, `{${user.user_id}}`]) {
        const res = await get(`/v2/user/${encodeURIComponent(id)}`);
        assert.deepEqual([res.statusCode, res.json()], [414, { detail: 'URI Too Long' }], id);
      }
      const head = await app.inject({ method: 'HEAD', url: '/v2/user/abc', headers: { 'x-service-api-key': team.key } });
      assert.equal(head.statusCode, 422);
      assert.equal(head.body, '');
    });

    it('answers the other lookups of a batch when one id is one PostgreSQL would refuse', async () => {
      // Lookups of one turn share a query: an id that passed validation but failed in PostgreSQL failed them all.
      const ids = [user.user_id, `urn:uuid:${user.user_id}`, user.user_id, `{${user.user_id}}`, user.user_id, user.user_id.replace(/-/g, '_')];
      const answers = await Promise.all(ids.map((id) => get(`/v2/user/${encodeURIComponent(id)}`)));
      assert.deepEqual(answers.map((r) => r.statusCode), [200, 414, 200, 414, 200, 422]);
    });

    it('takes an upper-case user_id as the same UUID', async () => {
      const res = await get(`/v2/user/${user.user_id.toUpperCase()}`);
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().user_id, user.user_id);
    });

    it('refuses a client_user_id over 255 characters in the resolve path with a 414 that does not echo it', async () => {
      const long = await get(`/v2/user/resolve/${'x'.repeat(256)}`);
      assert.deepEqual([long.statusCode, long.json()], [414, { detail: 'URI Too Long' }]);
      assert.equal((await get(`/v2/user/resolve/${'x'.repeat(255)}`)).statusCode, 404);
    });

    it('lists every problem of a create body', async () => {
      const res = await app.inject({
        method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key },
        payload: { client_user_id: '', fallback_time_zone: 'Nowhere/Atlantis', fallback_birth_date: '2023-02-29', ingestion_start: 'soon', colour: 'unknown fields are ignored' },
      });
      assertValidationError(res, [
        ['body', 'client_user_id'], ['body', 'fallback_time_zone'], ['body', 'fallback_birth_date'], ['body', 'ingestion_start'],
      ]);
      const missing = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: {} });
      assertValidationError(missing, [['body', 'client_user_id']]);
      assert.equal(missing.json().detail[0].type, 'missing');
    });
  });

  describe('HEAD', () => {
    it('answers like GET without a body on every GET route', async () => {
      for (const url of ['/v2/user/', '/v2/user', `/v2/user/${user.user_id}`, `/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`]) {
        const headers = { 'x-service-api-key': team.key, 'x-request-id': REQUEST_ID };
        const getRes = await app.inject({ method: 'GET', url, headers });
        const headRes = await app.inject({ method: 'HEAD', url, headers });
        assert.equal(headRes.statusCode, 200, url);
        assert.equal(headRes.body, '', url);
        assert.deepEqual(comparableHeaders(headRes.headers), comparableHeaders(getRes.headers), url);
      }
    });
  });

  describe('headers', () => {
    it('an Accept header never makes a request fail', async () => {
      const accepts = ['text/html', 'application/xml', 'image/png', 'text/plain;q=1, application/json;q=0', '*/*', 'application/json', 'nonsense///'];
      for (const url of ['/v2/user/?limit=2', `/v2/user/${user.user_id}`, `/v2/user/${randomUUID()}`]) {
        const plain = await get(url);
        for (const accept of accepts) {
          const res = await get(url, { accept });
          assert.equal(res.statusCode, plain.statusCode, `${url} with Accept: ${accept}`);
          assert.equal(res.body, plain.body);
          assertJson(res);
        }
      }
      const post = await app.inject({
        method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key, accept: 'text/html' },
        payload: { client_user_id: `accept-${randomUUID()}` },
      });
      assert.equal(post.statusCode, 200);
      assertJson(post);
      const unauthorised = await app.inject({ url: '/v2/user/', headers: { accept: 'text/html' } });
      assert.equal(unauthorised.statusCode, 401);
      assertJson(unauthorised);
    });

    it('echoes a sane x-request-id on every kind of answer', async () => {
      const requests: { method: Method; url: string; key?: string }[] = [
        { method: 'GET', url: '/v2/user/', key: team.key },
        { method: 'GET', url: '/v2/user/' },
        { method: 'GET', url: `/v2/user/${randomUUID()}`, key: team.key },
        { method: 'GET', url: '/v2/user/abc', key: team.key },
        { method: 'DELETE', url: '/v2/user/' },
        { method: 'GET', url: '/nowhere' },
      ];
      for (const id of ['abc-123', 'trace.4bf92f3577b34da6:00f067aa0ba902b7', 'A_b'.repeat(40)]) {
        for (const r of requests) {
          const res = await app.inject({ method: r.method, url: r.url, headers: { 'x-request-id': id, ...(r.key ? { 'x-service-api-key': r.key } : {}) } });
          assert.equal(res.headers['x-request-id'], id, `${r.method} ${r.url} (${res.statusCode})`);
        }
      }
    });

    it('generates an x-request-id when none or an unsafe one is sent', async () => {
      const seen = new Set<string>();
      for (const sent of [undefined, 'has space', 'x'.repeat(300), '<script>', 'a;b', 'ünïcode', '']) {
        const res = await get('/v2/user/?limit=1', sent === undefined ? {} : { 'x-request-id': sent });
        const id = String(res.headers['x-request-id']);
        assert.notEqual(id, sent);
        assert.match(id, UUID);
        assert.ok(!seen.has(id), 'generated ids are unique');
        seen.add(id);
      }
    });

    it('sends Cache-Control: no-store and JSON with user data', async () => {
      const answers = [
        await get('/v2/user/'),
        await get(`/v2/user/${user.user_id}`),
        await get(`/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`),
        await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: `cache-${randomUUID()}` } }),
      ];
      for (const res of answers) {
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.headers['cache-control'], 'no-store');
        assertJson(res);
      }
    });
  });
});

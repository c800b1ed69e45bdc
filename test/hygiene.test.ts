/** Response hygiene: headers that keep browsers and caches from mishandling health data. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

const ALLOWED = 'https://app.example.com';

describe('response hygiene', () => {
  let sql: Sql;
  let plain: App;
  let withCors: App;
  let team: TeamWithUsers;

  before(async () => {
    sql = testSql();
    plain = await testApp(sql);
    withCors = await testApp(sql, { CORS_ORIGINS: `${ALLOWED}, https://other.example.org` });
    team = await teamWithUsers(sql, 3);
  });
  after(async () => {
    await Promise.all([plain.close(), withCors.close()]);
    await sql.end();
  });

  const requests = () => [
    { url: '/v2/user/', headers: { 'x-service-api-key': team.key } },
    { url: `/v2/user/${team.users[0]!.user_id}`, headers: { 'x-service-api-key': team.key } },
    { url: '/v2/user/', headers: {} },
    { url: '/nowhere', headers: {} },
    { url: '/healthz', headers: {} },
  ];

  it('sends nosniff and no X-Powered-By on every answer, errors included', async () => {
    for (const r of requests()) {
      const res = await plain.inject(r);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', r.url);
      assert.equal(res.headers['x-powered-by'], undefined, r.url);
      assert.equal(res.headers.server, undefined, r.url);
    }
  });

  it('marks user data Cache-Control: no-store', async () => {
    for (const r of requests().slice(0, 3)) {
      const res = await plain.inject(r);
      assert.equal(res.headers['cache-control'], 'no-store', `${r.url} ${res.statusCode}`);
    }
  });

  it('sends no CORS headers when no allow-list is configured', async () => {
    const res = await plain.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key, origin: ALLOWED } });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(Object.keys(res.headers).filter((h) => h.startsWith('access-control-')), []);
    const preflight = await plain.inject({ method: 'OPTIONS', url: '/v2/user/', headers: { origin: ALLOWED, 'access-control-request-method': 'GET' } });
    assert.equal(preflight.statusCode, 405);
    assert.equal(preflight.headers['access-control-allow-origin'], undefined);
  });

  it('answers allow-listed origins only, preflights before authentication', async () => {
    const ok = await withCors.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key, origin: ALLOWED } });
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.headers['access-control-allow-origin'], ALLOWED);
    assert.match(String(ok.headers['access-control-expose-headers']), /ratelimit/);

    const foreign = await withCors.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key, origin: 'https://evil.example.net' } });
    assert.equal(foreign.statusCode, 200);
    assert.deepEqual(Object.keys(foreign.headers).filter((h) => h.startsWith('access-control-')), []);

    const preflight = await withCors.inject({
      method: 'OPTIONS', url: '/v2/user/',
      headers: { origin: ALLOWED, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-service-api-key' },
    });
    assert.equal(preflight.statusCode, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], ALLOWED);
    assert.match(String(preflight.headers['access-control-allow-headers']), /x-service-api-key/);

    const foreignPreflight = await withCors.inject({ method: 'OPTIONS', url: '/v2/user/', headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'GET' } });
    assert.equal(foreignPreflight.headers['access-control-allow-origin'], undefined);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { appWithTwoTeams, asApiUser, canonicalTimes, comparableHeaders, teamWithKey, type TeamWithUsers } from './helpers.js';

const resolveUrl = (clientUserId: string) => `/v2/user/resolve/${encodeURIComponent(clientUserId)}`;

describe('GET /v2/user/resolve/{client_user_id}', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(10, 3, (f) => ({ sql, app, team, other } = f));

  const get = (url: string, key: string, extra: Record<string, string> = {}) =>
    app.inject({ url, headers: { 'x-service-api-key': key, ...extra } });

  it('returns the same User object as GET /v2/user/{user_id}', async () => {
    for (const user of team.users) {
      const res = await get(resolveUrl(user.client_user_id), team.key);
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.deepEqual(canonicalTimes(res.json()), canonicalTimes(asApiUser(user)));
      const byId = await get(`/v2/user/${user.user_id}`, team.key);
      assert.equal(res.body, byId.body);
    }
  });

  it('finds a user created through the API, with characters that need URL encoding', async () => {
    const clientUserId = `ext/ref ${Date.now()}?&#%é`;
    const created = await app.inject({
      method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: clientUserId },
    });
    assert.equal(created.statusCode, 200, created.body);
    const res = await get(resolveUrl(clientUserId), team.key);
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().user_id, created.json().user_id);
    assert.equal(res.json().client_user_id, clientUserId);
  });

  it("answers another team's client_user_id exactly like an unknown one", async () => {
    const foreign = await get(resolveUrl(other.users[0]!.client_user_id), team.key, { 'x-request-id': 'same' });
    const unknown = await get(resolveUrl('no-such-client-user'), team.key, { 'x-request-id': 'same' });
    assert.equal(foreign.statusCode, 404);
    assert.deepEqual(foreign.json(), { detail: 'User not found' });
    assert.equal(foreign.body, unknown.body);
    assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
  });

  it('is scoped to the key: the same client_user_id in two teams resolves to each team its own user', async () => {
    const shared = `shared-${Date.now()}`;
    const a = await teamWithKey(sql, 'resolve a');
    const b = await teamWithKey(sql, 'resolve b');
    const ids: string[] = [];
    for (const t of [a, b]) {
      const res = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': t.key }, payload: { client_user_id: shared } });
      assert.equal(res.statusCode, 200);
      ids.push(res.json().user_id);
    }
    assert.notEqual(ids[0], ids[1]);
    const ra = await get(resolveUrl(shared), a.key);
    const rb = await get(resolveUrl(shared), b.key);
    assert.equal(ra.json().user_id, ids[0]);
    assert.equal(ra.json().team_id, a.teamId);
    assert.equal(rb.json().user_id, ids[1]);
    assert.equal(rb.json().team_id, b.teamId);
  });

  it('needs a valid key before anything else', async () => {
    const known = team.users[0]!.client_user_id;
    const missing = await app.inject({ url: resolveUrl(known) });
    const wrong = await get(resolveUrl(known), 'not-a-key');
    assert.equal(missing.statusCode, 401);
    assert.equal(wrong.statusCode, 401);
    assert.ok(missing.headers['www-authenticate']);
    assert.ok(!missing.body.includes(known));
  });

  it('refuses other methods with 405 and Allow', async () => {
    const res = await app.inject({ method: 'DELETE', url: resolveUrl('x'), headers: { 'x-service-api-key': team.key } });
    assert.equal(res.statusCode, 405);
    assert.equal(res.headers.allow, 'GET, HEAD');
  });

  it('resolves a client_user_id of the longest allowed length, even when every character needs encoding', async () => {
    for (const clientUserId of ['x'.repeat(255), '\u{1F600}'.repeat(127) + 'é']) {
      const created = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: clientUserId } });
      assert.equal(created.statusCode, 200, created.body);
      const res = await get(resolveUrl(clientUserId), team.key);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().client_user_id, clientUserId);
    }
  });

  it('answers a client_user_id longer than 255 characters with 414, without echoing it', async () => {
    const res = await get(resolveUrl('x'.repeat(256)), team.key);
    assert.deepEqual([res.statusCode, res.json()], [414, { detail: 'URI Too Long' }]);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { asApiUser, canonicalTimes, comparableHeaders, teamWithUsers, testApp, testSql } from './helpers.js';

describe('GET /v2/user/{user_id}', () => {
  let sql: Sql;
  let app: App;
  let team: Awaited<ReturnType<typeof teamWithUsers>>;
  let other: Awaited<ReturnType<typeof teamWithUsers>>;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithUsers(sql, 20);
    other = await teamWithUsers(sql, 5);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('returns the imported user with provider as a copy of source', async () => {
    for (const user of team.users) {
      const res = await app.inject({ url: `/v2/user/${user.user_id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.deepEqual(canonicalTimes(res.json()), canonicalTimes(asApiUser(user)));
    }
  });

  it("answers another team's user exactly like an unknown id", async () => {
    const foreign = await app.inject({ url: `/v2/user/${other.users[0]!.user_id}`, headers: { 'x-service-api-key': team.key, 'x-request-id': 'same' } });
    const unknown = await app.inject({ url: '/v2/user/00000000-0000-4000-8000-000000000000', headers: { 'x-service-api-key': team.key, 'x-request-id': 'same' } });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.body, unknown.body);
    assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
    assert.deepEqual(foreign.json(), { detail: 'User not found' });
  });
});

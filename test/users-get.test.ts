import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { appWithTwoTeams, asApiUser, canonicalTimes, comparableHeaders, type TeamWithUsers } from './helpers.js';

describe('GET /v2/user/{user_id}', () => {
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(20, 5, (f) => ({ app, team, other } = f));

  it('returns the imported user with provider as a copy of source', async () => {
    for (const user of team.users) {
      const res = await app.inject({ url: `/v2/user/${user.user_id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.deepEqual(canonicalTimes(res.json()), canonicalTimes(asApiUser(user)));
    }
  });

  it('answers concurrent lookups of two teams, batched into shared queries, each with its own users only', async () => {
    const asks = [...team.users, ...other.users].flatMap((u) => [
      { key: team.key, user: u, mine: u.team_id === team.users[0]!.team_id },
      { key: other.key, user: u, mine: u.team_id === other.users[0]!.team_id },
    ]);
    const answers = await Promise.all(asks.map((a) =>
      app.inject({ url: `/v2/user/${a.user.user_id}`, headers: { 'x-service-api-key': a.key } })));
    for (const [i, res] of answers.entries()) {
      const { user, mine } = asks[i]!;
      if (mine) assert.equal(res.json().user_id, user.user_id);
      else assert.deepEqual([res.statusCode, res.json()], [404, { detail: 'Not found' }]);
    }
    const upper = await app.inject({ url: `/v2/user/${team.users[0]!.user_id.toUpperCase()}`, headers: { 'x-service-api-key': team.key } });
    assert.equal(upper.json().user_id, team.users[0]!.user_id, 'an upper-case id finds the user too');
  });

  it("answers another team's user exactly like an unknown id", async () => {
    const foreign = await app.inject({ url: `/v2/user/${other.users[0]!.user_id}`, headers: { 'x-service-api-key': team.key, 'x-request-id': 'same' } });
    const unknown = await app.inject({ url: '/v2/user/00000000-0000-4000-8000-000000000000', headers: { 'x-service-api-key': team.key, 'x-request-id': 'same' } });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.body, unknown.body);
    assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
    assert.deepEqual(foreign.json(), { detail: 'Not found' });
  });
});

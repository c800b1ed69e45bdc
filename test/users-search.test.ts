/** GET /v2/team/users/search?query_id=Q: contract section 8. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { callAs, appWithTwoTeams, asApiUser, canonicalTimes, type TeamWithUsers } from './helpers.js';

describe('GET /v2/team/users/search', () => {
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(25, 10, (f) => ({ app, team, other } = f));

  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, key = team.key, payload?: object) =>
    callAs(app, key, method, url, payload);
  const search = (q: string, key = team.key) => call('GET', `/v2/team/users/search?query_id=${encodeURIComponent(q)}`, key);
  /** The ids a search answers, checking that it is a 200 array of the users as GET answers them. */
  const found = async (q: string, key = team.key) => {
    const res = await search(q, key);
    assert.equal(res.statusCode, 200, res.body);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const users = res.json() as Record<string, any>[];
    assert.ok(Array.isArray(users), res.body);
    for (const u of users) {
      const got = await call('GET', `/v2/user/${u.user_id}`, key);
      assert.equal(got.statusCode, 200);
      assert.deepEqual(u, got.json(), 'each is the User object GET answers');
    }
    return users.map((u) => u.user_id as string);
  };
  const create = async (clientUserId: string, key = team.key) => {
    const res = await call('POST', '/v2/user/', key, { client_user_id: clientUserId });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as Record<string, any>;
  };

  it('finds a user by its user_id, as the whole User object', async () => {
    const user = team.users.find((u) => u.connected_sources.length > 0)!;
    const res = await search(user.user_id);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(canonicalTimes(res.json()), canonicalTimes([asApiUser(user)]));
    assert.deepEqual(await found(user.user_id), [user.user_id]);
  });

  it('finds a user by its client_user_id', async () => {
    for (const user of team.users.slice(0, 5)) {
      assert.deepEqual(await found(user.client_user_id), [user.user_id], user.client_user_id);
    }
    const odd = await create(`ünï/cødé ${randomUUID()} #?&=+%`);
    assert.deepEqual(await found(odd.client_user_id), [odd.user_id]);
  });

  it('matches exactly: no prefix, substring or other letter case', async () => {
    const user = await create(`Exact-${randomUUID()}`);
    const id = user.client_user_id as string;
    for (const q of [id.slice(0, -1), id.slice(1), `${id}x`, id.toLowerCase(), id.toUpperCase(), ` ${id}`, user.user_id.slice(0, 8), 'Exact']) {
      assert.deepEqual(await found(q), [], q);
    }
    assert.deepEqual(await found(id), [user.user_id]);
  });

  it("finds both users when one's client_user_id is the other's user_id, in list order", async () => {
    const target = team.users[7]!;
    const twin = await create(target.user_id);
    assert.deepEqual(await found(target.user_id), [target.user_id, twin.user_id]);
    // A client_user_id that looks like a uuid no user has: only its holder.
    const lone = await create(randomUUID());
    assert.deepEqual(await found(lone.client_user_id), [lone.user_id]);
  });

  it('takes a query of exactly two characters', async () => {
    const user = await create('q7');
    assert.deepEqual(await found('q7'), [user.user_id]);
    assert.deepEqual(await found('q8'), []);
  });

  it("never answers another team's users", async () => {
    const theirs = other.users[0]!;
    assert.deepEqual(await found(theirs.user_id), []);
    assert.deepEqual(await found(theirs.client_user_id), []);
    // A client_user_id held in both teams: each team finds its own.
    const shared = `shared-${randomUUID()}`;
    const mine = await create(shared);
    const yours = await create(shared, other.key);
    assert.deepEqual(await found(shared), [mine.user_id]);
    assert.deepEqual(await found(shared, other.key), [yours.user_id]);
    // The other team's client_user_id equal to our user's user_id does not bring it in.
    const target = team.users[9]!;
    await create(target.user_id, other.key);
    assert.deepEqual(await found(target.user_id), [target.user_id]);
  });

  it('does not answer a user scheduled for deletion, and answers it again after undo', async () => {
    const user = await create(`leaving-${randomUUID()}`);
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
    assert.deepEqual(await found(user.user_id), []);
    assert.deepEqual(await found(user.client_user_id), []);
    // Its client_user_id taken by a new user: only the new one.
    const successor = await create(user.client_user_id);
    assert.deepEqual(await found(user.client_user_id), [successor.user_id]);
    assert.equal((await call('DELETE', `/v2/user/${successor.user_id}`)).statusCode, 200);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${user.user_id}`)).statusCode, 200);
    assert.deepEqual(await found(user.user_id), [user.user_id]);
    assert.deepEqual(await found(user.client_user_id), [user.user_id]);
  });

  it('follows a client_user_id changed by PATCH', async () => {
    const user = await create(`before-${randomUUID()}`);
    const renamed = `after-${randomUUID()}`;
    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, team.key, { client_user_id: renamed })).statusCode, 204);
    assert.deepEqual(await found(renamed), [user.user_id]);
    assert.deepEqual(await found(user.client_user_id), []);
  });

  it('refuses a query shorter than two characters with string_too_short at query.query_id', async () => {
    for (const q of ['a', '', '7']) {
      const res = await search(q);
      assert.equal(res.statusCode, 422, `${JSON.stringify(q)}: ${res.body}`);
      const { detail } = res.json();
      assert.equal(detail.length, 1, res.body);
      assert.equal(detail[0].type, 'string_too_short');
      assert.deepEqual(detail[0].loc, ['query', 'query_id']);
      assert.equal(detail[0].input, q);
    }
  });

  it('refuses a missing query_id with 422 at query.query_id', async () => {
    for (const url of ['/v2/team/users/search', '/v2/team/users/search?q=abc', '/v2/team/users/search?queryid=abc']) {
      const res = await call('GET', url);
      assert.equal(res.statusCode, 422, `${url}: ${res.body}`);
      assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['query', 'query_id']], res.body);
    }
  });

  it('wants a key, and answers nothing before it', async () => {
    for (const url of [`/v2/team/users/search?query_id=${team.users[0]!.user_id}`, '/v2/team/users/search?query_id=a', '/v2/team/users/search']) {
      const res = await app.inject({ url });
      assert.equal(res.statusCode, 401, url);
    }
  });

  it('answers an empty array when nothing matches', async () => {
    assert.deepEqual(await found(randomUUID()), []);
    assert.deepEqual(await found('nobody-has-this-id'), []);
    const res = await search('nobody-has-this-id');
    assert.equal(res.body, '[]');
  });
});

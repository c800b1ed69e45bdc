import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import { appWithTwoTeams, asApiUser, byListOrder, canonicalTimes, generateUsers, lines, teamWithKey, type TeamWithUsers, type TestTeam } from './helpers.js';

type ApiUser = Record<string, any> & { user_id: string; created_on: string };

/** Records sorted as the API lists them. */
const inListOrder = (records: Record<string, any>[]) => [...records as ApiUser[]].sort(byListOrder);

describe('GET /v2/user/ (listing and paging)', () => {
  let sql: Sql;
  let app: App;
  // More than 500 users, so that every tested limit, the largest included, needs several pages.
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(523, 40, (f) => ({ sql, app, team, other } = f));

  const list = (key: string, query = '', path = '/v2/user/') =>
    app.inject({ url: `${path}${query}`, headers: { 'x-service-api-key': key } });

  /** Every page of the team's list with this limit, checking each envelope on the way. */
  async function walk(key: string, limit: number): Promise<{ users: ApiUser[]; total: number }> {
    const users: ApiUser[] = [];
    let total: number | undefined;
    for (let offset = 0; total === undefined || offset < total; offset += limit) {
      const res = await list(key, `?offset=${offset}&limit=${limit}`);
      assert.equal(res.statusCode, 200, res.body);
      const page = res.json();
      assert.deepEqual(Object.keys(page).sort(), ['limit', 'offset', 'total', 'users']);
      assert.equal(page.offset, offset);
      assert.equal(page.limit, limit);
      total ??= page.total as number;
      assert.equal(page.total, total, 'total changed between pages of unchanged data');
      assert.equal(page.users.length, Math.min(limit, total - offset), `page at offset ${offset}`);
      users.push(...page.users);
    }
    return { users, total: total! };
  }

  /** A walk returns every user of the team exactly once, in list order, each equal to its record. */
  async function assertWalkMatches(key: string, limit: number, expected: Record<string, any>[]): Promise<void> {
    const { users, total } = await walk(key, limit);
    const sorted = inListOrder(expected);
    assert.equal(total, expected.length);
    assert.deepEqual(users.map((u) => u.user_id), sorted.map((u) => u.user_id), `order with limit ${limit}`);
    assert.deepEqual(canonicalTimes(users), canonicalTimes(sorted.map(asApiUser)));
  }

  for (const limit of [1, 7, 100, 500]) {
    it(`walking all pages with limit ${limit} returns every user once, in order, with the right total`, async () => {
      await assertWalkMatches(team.key, limit, team.users);
    });
  }

  it('walking all pages with a random limit does too', async () => {
    const limit = randomInt(2, 500);
    await assertWalkMatches(team.key, limit, team.users).catch((err: Error) => {
      err.message = `limit ${limit}: ${err.message}`;
      throw err;
    });
  });

  it('gives an empty page with the right total for offsets past the end', async () => {
    const n = team.users.length;
    for (const offset of [n, n + 1, n + 1000, 2 ** 31, 2 ** 53 - 1]) {
      const res = await list(team.key, `?offset=${offset}&limit=10`);
      assert.equal(res.statusCode, 200, `offset ${offset}: ${res.body}`);
      assert.deepEqual(res.json(), { users: [], total: n, offset, limit: 10 });
    }
  });

  it('the last partial page holds exactly the remaining users', async () => {
    const n = team.users.length;
    const res = await list(team.key, `?offset=${n - 3}&limit=100`);
    assert.deepEqual(res.json().users.map((u: ApiUser) => u.user_id), inListOrder(team.users).slice(-3).map((u) => u.user_id));
  });

  it('applies offset 0 and limit 100 by default, and echoes them', async () => {
    const res = await list(team.key);
    assert.equal(res.statusCode, 200);
    const page = res.json();
    assert.equal(page.offset, 0);
    assert.equal(page.limit, 100);
    assert.equal(page.total, team.users.length);
    assert.deepEqual(page.users.map((u: ApiUser) => u.user_id), inListOrder(team.users).slice(0, 100).map((u) => u.user_id));
    const onlyOffset = (await list(team.key, '?offset=5')).json();
    assert.equal(onlyOffset.limit, 100);
    assert.equal(onlyOffset.users.length, 100);
    const onlyLimit = (await list(team.key, '?limit=3')).json();
    assert.equal(onlyLimit.offset, 0);
    assert.equal(onlyLimit.users.length, 3);
  });

  it('answers /v2/user and /v2/user/ alike, without a redirect', async () => {
    for (const query of ['', '?offset=17&limit=9']) {
      const slash = await list(team.key, query, '/v2/user/');
      const bare = await list(team.key, query, '/v2/user');
      assert.equal(bare.statusCode, 200);
      assert.equal(bare.body, slash.body);
      assert.equal(bare.headers['content-type'], slash.headers['content-type']);
    }
  });

  it('ignores unknown query parameters', async () => {
    const plain = await list(team.key, '?limit=5');
    const extra = await list(team.key, '?limit=5&sort=desc&team_id=' + other.teamId);
    assert.equal(extra.statusCode, 200);
    assert.equal(extra.body, plain.body);
  });

  it("never shows another team's users", async () => {
    const mine = new Set(team.users.map((u) => u.user_id));
    const theirs = new Set(other.users.map((u) => u.user_id));
    const { users, total } = await walk(team.key, 500);
    assert.equal(total, mine.size);
    for (const u of users) {
      assert.equal(u.team_id, team.teamId);
      assert.ok(!theirs.has(u.user_id));
    }
    const { users: otherUsers } = await walk(other.key, 100);
    assert.deepEqual(otherUsers.map((u) => u.user_id).sort(), [...theirs].sort());
    for (const u of otherUsers) assert.ok(!mine.has(u.user_id));
  });

  it('a team without users lists nothing', async () => {
    const empty = await teamWithKey(sql, 'empty team');
    const res = await list(empty.key);
    assert.deepEqual(res.json(), { users: [], total: 0, offset: 0, limit: 100 });
  });

  describe('after imports out of order and creates', () => {
    let mixed: TestTeam;
    let records: Record<string, any>[];

    before(async () => {
      mixed = await teamWithKey(sql, 'two batches');
      records = inListOrder(generateUsers(120).map((u) => ({ ...u, team_id: mixed.teamId })));
    });

    it('a second import whose users sort before and between the first batch keeps paging exact', async () => {
      // First batch: every other user of the later part. Second batch: all of the earlier part and
      // the rest of the later part, so it lands before and between the stored users.
      const first = records.filter((_, i) => i >= 40 && i % 2 === 0);
      const second = records.filter((_, i) => i < 40 || i % 2 === 1);
      await importUsers(sql, lines(first));
      await assertWalkMatches(mixed.key, 7, first);
      await importUsers(sql, lines(second));
      for (const limit of [1, 13]) await assertWalkMatches(mixed.key, limit, records);
    });

    it('a user created through the API after an import comes last, and paging stays exact', async () => {
      const created = await app.inject({
        method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': mixed.key }, payload: { client_user_id: 'after-import' },
      });
      assert.equal(created.statusCode, 200, created.body);
      const fresh = (await app.inject({ url: `/v2/user/${created.json().user_id}`, headers: { 'x-service-api-key': mixed.key } })).json();
      records.push(fresh);
      const { users } = await walk(mixed.key, 11);
      assert.equal(users.at(-1)!.user_id, fresh.user_id);
      await assertWalkMatches(mixed.key, 1, records);
    });

    it('a create after an import of users dated in the future sorts before them', async () => {
      // Users from the future (a clock ahead elsewhere): a new user now belongs before them, not at the end.
      const future = generateUsers(5).map((u, i) => ({
        ...u, team_id: mixed.teamId, created_on: `2999-01-0${i + 1}T00:00:00.5+00:00`, connected_sources: [],
      }));
      await importUsers(sql, lines(future));
      records.push(...future);
      const created = await app.inject({
        method: 'POST', url: '/v2/user', headers: { 'x-service-api-key': mixed.key }, payload: { client_user_id: 'before-future' },
      });
      assert.equal(created.statusCode, 200, created.body);
      const fresh = (await app.inject({ url: `/v2/user/${created.json().user_id}`, headers: { 'x-service-api-key': mixed.key } })).json();
      records.push(fresh);
      const { users } = await walk(mixed.key, 500);
      assert.equal(users.at(-6)!.user_id, fresh.user_id);
      for (const limit of [1, 4]) await assertWalkMatches(mixed.key, limit, records);
    });
  });
});

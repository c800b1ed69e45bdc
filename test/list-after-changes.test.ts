/**
 * Paging stays exact while users leave and come back: deletes leave holes in
 * the positions, which each page finds its start past (src/users/README.md).
 * Random deletes, undos, creates, purges and imports, each followed by a walk
 * of every page against a model of the list.
 */
import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import { purgeDeletedUsers } from '../src/users/deletion.js';
import { recountTeams } from '../src/users/recount.js';
import { callAs, byListOrder, generateUsers, lines, metricBySource, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

interface Listed { user_id: string; created_on: string }

describe('paging while users change and leave', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  /** The model: the team's live users and the ones scheduled for deletion. */
  const live = new Map<string, Listed>();
  const scheduled = new Map<string, Listed>();

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    // Several buckets of 256 positions, the last one partly filled.
    team = await teamWithUsers(sql, 1100);
    for (const u of team.users) live.set(u.user_id, { user_id: u.user_id, created_on: u.created_on });
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
    callAs(app, team.key, method, url, payload);
  const pick = <T>(from: Map<string, T>) => [...from.keys()][randomInt(from.size)]!;

  async function deleteOne(): Promise<void> {
    const id = pick(live);
    assert.equal((await call('DELETE', `/v2/user/${id}`)).statusCode, 200);
    scheduled.set(id, live.get(id)!);
    live.delete(id);
  }
  async function undoOne(): Promise<void> {
    const id = pick(scheduled);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${id}`)).statusCode, 200);
    live.set(id, scheduled.get(id)!);
    scheduled.delete(id);
  }
  async function createOne(): Promise<void> {
    const res = await call('POST', '/v2/user/', { client_user_id: `paging-${randomUUID()}` });
    assert.equal(res.statusCode, 200, res.body);
    live.set(res.json().user_id, { user_id: res.json().user_id, created_on: res.json().created_on });
  }

  /** Every page of every size against the model, and the team's kept state against a recount. */
  async function assertPagesExact(what: string): Promise<void> {
    const expected = [...live.values()].sort(byListOrder).map((u) => u.user_id);
    for (const limit of [1, 37, 256, 500]) {
      const seen: string[] = [];
      for (let offset = 0; offset <= expected.length; offset += limit) {
        const page = (await call('GET', `/v2/user/?offset=${offset}&limit=${limit}`)).json();
        assert.equal(page.total, expected.length, `${what}: total`);
        seen.push(...page.users.map((u: Listed) => u.user_id));
      }
      assert.deepEqual(seen, expected, `${what}: pages of ${limit}`);
    }
    for (let i = 0; i < 20; i++) {
      const offset = randomInt(expected.length + 3);
      const page = (await call('GET', `/v2/user/?offset=${offset}&limit=7`)).json();
      assert.deepEqual(page.users.map((u: Listed) => u.user_id), expected.slice(offset, offset + 7), `${what}: offset ${offset}`);
    }
    assert.deepEqual((await recountTeams(sql, [team.teamId])).drifts, [], `${what}: kept as a recount of the users finds it`);
    const [stored] = await sql<{ user_count: string }[]>`SELECT user_count::text AS user_count FROM teams WHERE team_id = ${team.teamId}`;
    assert.equal(Number(stored!.user_count), expected.length);
  }

  it('a delete of the first, a middle and the last user', async () => {
    const order = [...live.values()].sort(byListOrder);
    for (const u of [order[0]!, order[300]!, order.at(-1)!]) {
      assert.equal((await call('DELETE', `/v2/user/${u.user_id}`)).statusCode, 200);
      scheduled.set(u.user_id, u);
      live.delete(u.user_id);
    }
    await assertPagesExact('three deletes');
  });

  it('a whole bucket deleted, then partly restored', async () => {
    const order = [...live.values()].sort(byListOrder);
    for (const u of order.slice(500, 800)) {
      assert.equal((await call('DELETE', `/v2/user/${u.user_id}`)).statusCode, 200);
      scheduled.set(u.user_id, u);
      live.delete(u.user_id);
    }
    await assertPagesExact('300 consecutive deletes');
    for (let i = 0; i < 120; i++) await undoOne();
    await assertPagesExact('120 undos');
  });

  it('random deletes, undos and creates', async () => {
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 60; i++) {
        const r = randomInt(10);
        if (r < 5) await deleteOne();
        else if (r < 8 && scheduled.size > 0) await undoOne();
        else await createOne();
      }
      await assertPagesExact(`round ${round}`);
    }
  });

  it('purged users leave holes; paging stays exact', async () => {
    await sql`UPDATE deleted_users SET deleted_at = now() - interval '1 day' WHERE team_id = ${team.teamId}`;
    await purgeDeletedUsers(sql, 3_600_000);
    scheduled.clear();
    await assertPagesExact('after the purge');
    for (let i = 0; i < 20; i++) await createOne();
    await assertPagesExact('creates after the purge');
  });

  it('an import that appends keeps every stored position; one that does not ranks the team anew', async () => {
    for (let i = 0; i < 30; i++) await deleteOne();
    const [{ moved_before }] = await sql<[{ moved_before: string }]>`
      SELECT string_agg(user_id::text || ':' || position, ',' ORDER BY user_id) AS moved_before FROM users WHERE team_id = ${team.teamId}`;
    // New users dated after every stored one: appended, nothing stored moves.
    const later: Record<string, any>[] = generateUsers(40).map((u, i) => ({ ...u, team_id: team.teamId, created_on: new Date(Date.now() + 3_600_000 + i * 1000).toISOString() }));
    await importUsers(sql, lines(later), undefined, { method: 'merge' });
    for (const u of later) live.set(u.user_id, { user_id: u.user_id, created_on: u.created_on });
    const [{ moved_after }] = await sql<[{ moved_after: string }]>`
      SELECT string_agg(user_id::text || ':' || position, ',' ORDER BY user_id) AS moved_after
      FROM users WHERE team_id = ${team.teamId} AND NOT user_id = ANY(${later.map((u) => u.user_id)}::uuid[])`;
    assert.equal(moved_after, moved_before, 'no stored position moved');
    await assertPagesExact('an appending import');

    // Users dated before everybody: the team is ranked anew, the scheduled users with it.
    const earlier: Record<string, any>[] = generateUsers(25).map((u, i) => ({ ...u, team_id: team.teamId, created_on: new Date(Date.UTC(2001, 0, 1) + i * 1000).toISOString() }));
    await importUsers(sql, lines(earlier), undefined, { method: 'merge' });
    for (const u of earlier) live.set(u.user_id, { user_id: u.user_id, created_on: u.created_on });
    await assertPagesExact('an import of older users');
    while (scheduled.size > 0) await undoOne();
    await assertPagesExact('every deletion undone after the renumbering');
  });

  it('most of those pages started from copies of the holes (src/users/hole-copies.ts)', async () => {
    const copy = await metricBySource(app, 'hds_list_hole_starts_total', 'copy');
    const database = await metricBySource(app, 'hds_list_hole_starts_total', 'database');
    assert.ok(copy > database, `from a copy ${copy}, from list_page_start ${database}`);
  });
});

/**
 * Copies of a team's holes in memory (src/users/hole-copies.ts): a page's
 * start from a copy is list_page_start's, and it is used only while the
 * team's holes are at the copy's version, which every write that opens,
 * fills or rewrites a hole moves (src/writes/team-state.ts).
 */
import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { importUsers } from '../src/import/import.js';
import { purgeDeletedUsers } from '../src/users/deletion.js';
import { HoleCopies } from '../src/users/hole-copies.js';
import { findHoleLives, findUserPage, type HoleLives } from '../src/users/queries.js';
import { compactSparseTeams, recountTeamState } from '../src/writes/team-state.js';
import { appWithTwoTeams, callAs, generateUsers, lines, metricBySource, teamWithKey, type TeamWithUsers } from './helpers.js';

interface Listed { user_id: string; created_on: string }

/** Pages of the team that started without a copy, told to `copies` until it asks for one, which gets `copy`; whether it asked. */
async function loadInto(copies: HoleCopies, teamId: string, copy: HoleLives): Promise<boolean> {
  let load: Promise<unknown> | undefined;
  const holes = { version: copy.holesVersion, count: copy.lives.length };
  for (let i = 0; i <= copy.lives.length && !load; i++) copies.seen(teamId, holes, undefined, () => (load = Promise.resolve(copy)));
  await load;
  return load !== undefined;
}

describe('copies of the holes', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;
  appWithTwoTeams(1500, 300, (f) => ({ sql, app, team, other } = f));

  const holesVersion = async (teamId: string) =>
    (await sql<{ v: string }[]>`SELECT holes_version::text AS v FROM teams WHERE team_id = ${teamId}`)[0]!.v;
  /** What `write` did to the team's holes' version: 'moved' or 'kept'. */
  const versionAfter = async (teamId: string, write: () => Promise<unknown>) => {
    const before = await holesVersion(teamId);
    await write();
    return (await holesVersion(teamId)) === before ? 'kept' : 'moved';
  };
  const ok = async (request: Promise<{ statusCode: number; body: string }>) => {
    const res = await request;
    assert.ok(res.statusCode >= 200 && res.statusCode < 300, `${res.statusCode} ${res.body}`);
  };
  const pageIds = async (teamId: string, offset: number, limit: number, known?: { holesVersion: string; start: number }) =>
    JSON.parse((await findUserPage(sql, teamId, offset, limit, undefined, known))!.body.toString()).users.map((u: Listed) => u.user_id) as string[];
  /** The team's live users in list order, from the users themselves. */
  const liveIds = async (teamId: string) =>
    (await sql<{ user_id: string }[]>`SELECT user_id::text FROM users WHERE team_id = ${teamId} ORDER BY created_on, user_id`).map((u) => u.user_id);
  /** A HoleCopies holding the team's copy as PostgreSQL has it now. */
  const copyOf = async (teamId: string) => {
    const copies = new HoleCopies(1_000_000);
    const read = await findHoleLives(sql, teamId);
    assert.ok(read);
    assert.ok(await loadInto(copies, teamId, read) && copies.startOf(teamId, 0), 'the copy was loaded');
    return copies;
  };

  it('every write that opens, fills or rewrites a hole moves the version of the holes, and no other write does', async () => {
    const [first, second, third] = team.users.slice(0, 3).map((u) => String(u.user_id)) as [string, string, string];
    assert.equal(await versionAfter(team.teamId, () => ok(callAs(app, team.key, 'POST', '/v2/user/', { client_user_id: `copies-${randomUUID()}` }))), 'kept', 'a create');
    assert.equal(await versionAfter(team.teamId, () => ok(callAs(app, team.key, 'PATCH', `/v2/user/${first}`, { fallback_time_zone: 'Europe/Paris' }))), 'kept', 'a patch');
    assert.equal(await versionAfter(team.teamId, () => ok(callAs(app, team.key, 'DELETE', `/v2/user/${first}`))), 'moved', 'a delete');
    assert.equal(await versionAfter(team.teamId, () => ok(callAs(app, team.key, 'POST', `/v2/user/undo_delete?user_id=${first}`))), 'moved', 'an undo');
    await ok(callAs(app, team.key, 'DELETE', `/v2/user/${second}`));
    await sql`UPDATE deleted_users SET deleted_at = now() - interval '1 day' WHERE user_id = ${second}`;
    assert.equal(await versionAfter(team.teamId, () => purgeDeletedUsers(sql, 3_600_000)), 'kept', 'a purge (its hole stays)');
    assert.equal(await versionAfter(team.teamId, () => sql.begin((tx) => recountTeamState(tx, [team.teamId]))), 'moved', 'a recount (a merge import, a renumbering, the bench restore)');
    await ok(callAs(app, team.key, 'DELETE', `/v2/user/${third}`));
    const earlier = generateUsers(3).map((u, i) => ({ ...u, team_id: team.teamId, created_on: new Date(Date.UTC(2001, 0, 1) + i * 1000).toISOString() }));
    assert.equal(await versionAfter(team.teamId, () => importUsers(sql, lines(earlier), undefined, { method: 'merge' })), 'moved', 'an import that ranks the team anew');
    assert.equal(await versionAfter(other.teamId, () => ok(callAs(app, team.key, 'DELETE', `/v2/user/${String(team.users[10]!.user_id)}`))), 'kept', "another team's delete");

    const empty = await teamWithKey(sql, 'copies bulk');
    const loaded = generateUsers(20).map((u) => ({ ...u, team_id: empty.teamId }));
    assert.equal(await versionAfter(empty.teamId, () => importUsers(sql, lines(loaded), undefined, { method: 'bulk' })), 'moved', 'a bulk load');

    // A team compacts once purged users hold a quarter of its positions.
    const sparse = await teamWithKey(sql, 'copies compaction');
    const users: Record<string, any>[] = generateUsers(40).map((u) => ({ ...u, team_id: sparse.teamId }));
    await importUsers(sql, lines(users));
    for (const u of users.slice(0, 12)) await ok(callAs(app, sparse.key, 'DELETE', `/v2/user/${String(u.user_id)}`));
    await sql`UPDATE deleted_users SET deleted_at = now() - interval '1 day' WHERE team_id = ${sparse.teamId}`;
    await purgeDeletedUsers(sql, 3_600_000);
    assert.equal(await versionAfter(sparse.teamId, async () => assert.deepEqual(await compactSparseTeams(sql, [sparse.teamId]), [sparse.teamId])), 'moved', 'a compaction');
  });

  it("a copy's start is list_page_start's at every offset", async () => {
    const order = await liveIds(team.teamId);
    // Scattered deletes, a run across a bucket's edge and a whole bucket emptied.
    const gone = new Set([...Array.from({ length: 200 }, () => order[randomInt(order.length)]!), ...order.slice(250, 262), ...order.slice(512, 768)]);
    for (const id of gone) await ok(callAs(app, team.key, 'DELETE', `/v2/user/${id}`));
    const copies = await copyOf(team.teamId);
    const [{ users, holes }] = await sql<[{ users: number; holes: number }]>`
      SELECT user_count::int AS users, (next_position - 1 - user_count)::int AS holes FROM teams WHERE team_id = ${team.teamId}`;
    assert.ok(holes > 400, `${holes} holes`);
    const starts = await sql<{ start: string }[]>`
      SELECT list_page_start(${team.teamId}, o, ${holes})::text AS start FROM generate_series(0, ${users + 2}) AS o ORDER BY o`;
    for (let offset = 0; offset <= users + 2; offset++) {
      assert.equal(copies.startOf(team.teamId, offset)!.start, Number(starts[offset]!.start), `offset ${offset}`);
    }
  });

  it("a copy's start is not used once the holes moved: the page is list_page_start's", async () => {
    const copies = await copyOf(team.teamId);
    let live = await liveIds(team.teamId);
    const offset = 700;
    const stale = copies.startOf(team.teamId, offset)!;
    assert.deepEqual(await pageIds(team.teamId, offset, 20, stale), live.slice(offset, offset + 20), 'the copy at its version');
    // A delete before the offset: the copy's start now lies one user too early.
    await ok(callAs(app, team.key, 'DELETE', `/v2/user/${live[3]!}`));
    live = await liveIds(team.teamId);
    assert.deepEqual(await pageIds(team.teamId, offset, 20, stale), live.slice(offset, offset + 20), 'after a delete');
    // A start that would be wrong even at the right version is never trusted past it either.
    assert.deepEqual(await pageIds(team.teamId, offset, 20, { holesVersion: stale.holesVersion, start: 1 }), live.slice(offset, offset + 20));
  });

  it('keeps at most its bound of holes, the least recently used team dropped first', async () => {
    const copies = new HoleCopies(10);
    const loadFor = (teamId: string, holes: number) => loadInto(copies, teamId, { holesVersion: '1', lives: new Float64Array(holes) });
    assert.ok(await loadFor('a', 6));
    assert.ok(await loadFor('b', 4));
    assert.ok(copies.startOf('a', 0) && copies.startOf('b', 0), 'both within the bound');
    assert.ok(await loadFor('c', 3));
    assert.equal(copies.startOf('a', 0), undefined, 'the least recently used dropped');
    assert.ok(copies.startOf('b', 0) && copies.startOf('c', 0));
    assert.equal(await loadFor('d', 11), false, 'a team with more holes than the bound is never read');
  });

  it('the service loads a copy and pages from it, exact at every offset', async () => {
    const live = await liveIds(team.teamId);
    const fromCopy = () => metricBySource(app, 'hds_list_hole_starts_total', 'copy');
    const before = await fromCopy();
    // Random offsets and limits, each a new page (no page cache hit), until the copy served some.
    for (let round = 0; round < 200 && (await fromCopy()) < before + 20; round++) {
      const offset = randomInt(live.length + 2);
      const limit = 1 + randomInt(60);
      const page = (await callAs(app, team.key, 'GET', `/v2/user/?offset=${offset}&limit=${limit}`)).json();
      assert.deepEqual(page.users.map((u: Listed) => u.user_id), live.slice(offset, offset + limit), `offset ${offset}, limit ${limit}`);
    }
    assert.ok((await fromCopy()) >= before + 20, 'pages started from a copy');
  });
});

/**
 * Where a page starts after deletions, across several blocks of buckets
 * (src/users/README.md, migrations/012), and the purge pass's compaction:
 * once purged users hold a quarter of a team's positions, the team is
 * renumbered, so that churn does not grow its holes without bound.
 */
import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { purgeDeletedUsers } from '../src/users/deletion.js';
import { findUserPage } from '../src/users/queries.js';
import { recountTeams } from '../src/users/recount.js';
import { compactSparseTeams } from '../src/writes/team-state.js';
import { appWithTwoTeams, byListOrder, callAs, type TeamWithUsers } from './helpers.js';

interface Listed { user_id: string; created_on: string }

/** A block holds 64 buckets of 256 positions (migrations/012). */
const BLOCK_POSITIONS = 64 * 256;

describe('pages past holes in several blocks, and compaction', () => {
  let sql: Sql;
  let app: App;
  let big: TeamWithUsers;
  let small: TeamWithUsers;
  appWithTwoTeams(BLOCK_POSITIONS + 3000, 400, (f) => ({ sql, app, team: big, other: small } = f));

  /** The team's live users in list order, from the model `live`. */
  const ordered = (live: Map<string, Listed>) => [...live.values()].sort(byListOrder).map((u) => u.user_id);
  const pageIds = async (teamId: string, offset: number, limit: number) =>
    JSON.parse((await findUserPage(sql, teamId, offset, limit))!.body.toString()).users.map((u: Listed) => u.user_id) as string[];
  const remove = async (team: TeamWithUsers, ids: string[]) => {
    for (const id of ids) assert.equal((await callAs(app, team.key, 'DELETE', `/v2/user/${id}`)).statusCode, 200);
  };
  /** Purges the team's scheduled users except `keep`, as after the grace period. */
  const purgeAllBut = async (team: TeamWithUsers, keep: string[] = []) => {
    await sql`UPDATE deleted_users SET deleted_at = now() - interval '1 day' WHERE team_id = ${team.teamId} AND NOT user_id = ANY(${keep}::uuid[])`;
    await purgeDeletedUsers(sql, 3_600_000);
  };
  const positions = async (teamId: string) => (await sql<{ given: string; live: string; scheduled: string; buckets: string }[]>`
    SELECT (t.next_position - 1)::text AS given, t.user_count::text AS live,
      (SELECT count(*) FROM deleted_users d WHERE d.team_id = t.team_id)::text AS scheduled,
      (SELECT count(*) FROM list_holes h WHERE h.team_id = t.team_id)::text AS buckets
    FROM teams t WHERE t.team_id = ${teamId}`)[0]!;

  it('finds every page start with holes in every block, at block edges, and in a block emptied whole', async () => {
    const live = new Map<string, Listed>(big.users.map((u) => [u.user_id, { user_id: u.user_id, created_on: u.created_on }]));
    const order = ordered(live);
    // Scattered deletes in both blocks, a run across the first block's edge, and every user of a bucket of the second.
    const gone = new Set<string>([
      ...Array.from({ length: 100 }, () => order[randomInt(order.length)]!),
      ...order.slice(BLOCK_POSITIONS - 100, BLOCK_POSITIONS + 100),
      ...order.slice(BLOCK_POSITIONS + 1024, BLOCK_POSITIONS + 1280),
    ]);
    await remove(big, [...gone]);
    for (const id of gone) live.delete(id);
    const expected = ordered(live);
    const edges = [0, 1, BLOCK_POSITIONS - 160, BLOCK_POSITIONS - 101, BLOCK_POSITIONS - 100, BLOCK_POSITIONS - 1, BLOCK_POSITIONS,
      BLOCK_POSITIONS + 800, BLOCK_POSITIONS + 1000, expected.length - 3, expected.length - 1, expected.length];
    for (const offset of [...edges, ...Array.from({ length: 60 }, () => randomInt(expected.length + 2))]) {
      assert.deepEqual(await pageIds(big.teamId, offset, 9), expected.slice(offset, offset + 9), `offset ${offset}`);
    }
    assert.deepEqual((await recountTeams(sql, [big.teamId])).drifts, []);
  });

  it('leaves a team whose purged users hold less than a quarter of its positions as it is', async () => {
    const order = small.users.map((u) => u.user_id);
    await remove(small, order.slice(0, 40));
    await purgeAllBut(small);
    assert.deepEqual(await compactSparseTeams(sql, [small.teamId]), []);
    assert.equal((await positions(small.teamId)).given, '400');
  });

  it("renumbers a team once purged users hold a quarter of its positions; users scheduled for deletion keep theirs, in order", async () => {
    const live = new Map<string, Listed>(small.users.slice(40).map((u) => [u.user_id, { user_id: u.user_id, created_on: u.created_on }]));
    const victims = [...live.keys()].filter(() => randomInt(3) === 0).slice(0, 80);
    await remove(small, victims);
    const kept = victims.slice(0, 10);
    for (const id of victims.slice(10)) live.delete(id);
    await purgeAllBut(small, kept);
    for (const id of kept) live.delete(id);
    assert.deepEqual(await compactSparseTeams(sql, [small.teamId]), [small.teamId]);
    const after = await positions(small.teamId);
    assert.equal(Number(after.given), live.size + kept.length, 'only live and scheduled users hold positions');
    assert.deepEqual((await recountTeams(sql, [small.teamId])).drifts, []);
    const expected = ordered(live);
    for (let offset = 0; offset <= expected.length; offset += 13) {
      assert.deepEqual(await pageIds(small.teamId, offset, 13), expected.slice(offset, offset + 13), `offset ${offset}`);
    }
    // A user scheduled before the compaction comes back where list order puts it.
    const back = small.users.find((u) => u.user_id === kept[0])!;
    assert.equal((await callAs(app, small.key, 'POST', `/v2/user/undo_delete?user_id=${back.user_id}`)).statusCode, 200);
    live.set(back.user_id, { user_id: back.user_id, created_on: back.created_on });
    assert.deepEqual(await pageIds(small.teamId, 0, 500), ordered(live));
    assert.deepEqual((await recountTeams(sql, [small.teamId])).drifts, []);
  });

  it('keeps the positions given out within a third more than the users, round after round of churn', async () => {
    await purgeAllBut(small);
    await compactSparseTeams(sql, [small.teamId]);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 150; i++) {
        assert.equal((await callAs(app, small.key, 'POST', '/v2/user/', { client_user_id: `churn-${randomUUID()}` })).statusCode, 200);
      }
      const ids = (await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${small.teamId} ORDER BY random() LIMIT 150`).map((u) => u.user_id);
      await remove(small, ids);
      await purgeAllBut(small);
      await compactSparseTeams(sql, [small.teamId]);
      const now = await positions(small.teamId);
      assert.ok(Number(now.given) * 3 <= Number(now.live) * 4, `round ${round}: ${now.given} positions given out for ${now.live} users`);
      assert.equal(now.scheduled, '0');
    }
    assert.deepEqual((await recountTeams(sql, [small.teamId])).drifts, []);
    const expected = (await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${small.teamId} ORDER BY created_on, user_id`).map((u) => u.user_id);
    assert.deepEqual(await pageIds(small.teamId, 0, 500), expected);
  });
});

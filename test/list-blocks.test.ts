/**
 * A page's start across blocks of 16,384 positions (64 buckets of 256): the
 * team's thresholds per block and a block's per bucket (migrations/014).
 * Holes in the first and third blocks, none in the second, then the third's
 * last holes filled again (undo), so that the team's thresholds run on past
 * its last block with holes; each time, pages at offsets on both sides of
 * every block's, bucket's and hole's edge against a model, and a recount.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { recountTeams } from '../src/users/recount.js';
import { byListOrder, callAs, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

const BLOCK = 16_384;
const BUCKET = 256;

describe('page starts across blocks of buckets', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let ordered: string[];
  const gone = new Set<string>();

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithUsers(sql, 2 * BLOCK + 3 * BUCKET + 17);
    ordered = team.users.map((u) => ({ user_id: String(u.user_id), created_on: String(u.created_on) })).sort(byListOrder).map((u) => u.user_id);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string) => callAs(app, team.key, method, url);

  /** Pages of 3 at offsets around every edge, and at random ones, against the model; then the recount. */
  async function assertStarts(what: string): Promise<void> {
    const expected = ordered.filter((id) => !gone.has(id));
    const offsets = new Set<number>();
    for (let edge = 0; edge <= expected.length + BUCKET; edge += BUCKET) {
      for (const d of [-2, -1, 0, 1]) if (edge + d >= 0) offsets.add(edge + d);
    }
    // And on both sides of every hole: the live users before it, give or take two.
    let live = 0;
    for (const id of ordered) {
      if (!gone.has(id)) live++;
      else for (const d of [-2, -1, 0, 1]) if (live + d >= 0) offsets.add(live + d);
    }
    for (let i = 0; i < 50; i++) offsets.add(randomInt(expected.length + 2));
    for (const offset of offsets) {
      const page = (await call('GET', `/v2/user/?offset=${offset}&limit=3`)).json();
      assert.deepEqual(page.users.map((u: { user_id: string }) => u.user_id), expected.slice(offset, offset + 3), `${what}: offset ${offset}`);
    }
    assert.deepEqual((await recountTeams(sql, [team.teamId])).drifts, [], `${what}: kept as a recount finds it`);
  }

  async function remove(ids: string[]): Promise<void> {
    for (const id of ids) {
      assert.equal((await call('DELETE', `/v2/user/${id}`)).statusCode, 200);
      gone.add(id);
    }
  }

  it('finds every start with holes in the first and third blocks only', async () => {
    // Positions are 1-based ranks in list order: ordered[p - 1] holds position p.
    const at = (positions: number[]) => positions.map((p) => ordered[p - 1]!);
    await remove(at([1, 2, 256, 257, 300, 301, 302, BLOCK, 2 * BLOCK + 1, 2 * BLOCK + 256, 2 * BLOCK + 600, 2 * BLOCK + 601]));
    // A bucket emptied whole: its threshold equals the next one's.
    await remove(at(Array.from({ length: BUCKET }, (_, i) => 2 * BUCKET + 1 + i)));
    await assertStarts('after the deletes');
  });

  it('still finds them once the last block\'s holes are filled again', async () => {
    const last = ordered.filter((id, i) => gone.has(id) && i >= 2 * BLOCK);
    for (const id of last) {
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${id}`)).statusCode, 200);
      gone.delete(id);
    }
    const [row] = await sql<{ n: number }[]>`SELECT cardinality(block_starts) AS n FROM list_hole_teams WHERE team_id = ${team.teamId}`;
    assert.equal(row?.n, 4, 'the thresholds still run to past the third block');
    await assertStarts('after the undos');
  });
});

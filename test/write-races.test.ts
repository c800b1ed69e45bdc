/**
 * Concurrent writes that lock the same rows in opposite orders: PostgreSQL
 * breaks such a deadlock by failing one of them, which is run again
 * (src/users/retry.ts). Each answer is one the contract allows; none is a 500.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { appWithTeam, callAs, type TestTeam } from './helpers.js';

const ROUNDS = 40;

describe('concurrent writes that meet in opposite orders', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;

  appWithTeam((fixture) => ({ sql, app, team } = fixture));

  const call = (method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    callAs(app, team.key, method, url, payload);
  const create = async (clientUserId: string) => {
    const res = await call('POST', '/v2/user/', { client_user_id: clientUserId });
    assert.equal(res.statusCode, 200, res.body);
    return res.json().user_id as string;
  };

  it('two patches swapping client_user_ids: each 204 or 409', async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < ROUNDS; i++) {
      const [a, b] = [`swap-a-${randomUUID()}`, `swap-b-${randomUUID()}`];
      const [x, y] = [await create(a), await create(b)];
      const answers = await Promise.all([
        call('PATCH', `/v2/user/${x}`, { client_user_id: b }),
        call('PATCH', `/v2/user/${y}`, { client_user_id: a }),
      ]);
      for (const res of answers) {
        assert.ok([204, 409].includes(res.statusCode), `${res.statusCode} ${res.body}`);
        statuses.add(res.statusCode);
      }
    }
    assert.ok(statuses.has(409), 'the swaps did meet');
  });

  it('a create taking the client_user_id of a user whose deletion is undone meanwhile: one of them wins', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const clientUserId = `undo-race-${randomUUID()}`;
      const userId = await create(clientUserId);
      assert.equal((await call('DELETE', `/v2/user/${userId}`)).statusCode, 200);
      const [created, undone] = await Promise.all([
        call('POST', '/v2/user/', { client_user_id: clientUserId }),
        call('POST', `/v2/user/undo_delete?user_id=${userId}`),
      ]);
      assert.ok([200, 400].includes(created.statusCode), `create: ${created.statusCode} ${created.body}`);
      assert.ok([200, 409].includes(undone.statusCode), `undo: ${undone.statusCode} ${undone.body}`);
      assert.equal((created.statusCode === 200) !== (undone.statusCode === 200), true, 'exactly one holds the client_user_id');
    }
  });

  it('a create of the client_user_id a delete is releasing: both succeed, or the create is refused', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const clientUserId = `delete-race-${randomUUID()}`;
      const userId = await create(clientUserId);
      const [deleted, created] = await Promise.all([
        call('DELETE', `/v2/user/${userId}`),
        call('POST', '/v2/user/', { client_user_id: clientUserId }),
      ]);
      assert.equal(deleted.statusCode, 200, deleted.body);
      assert.ok([200, 400].includes(created.statusCode), `create: ${created.statusCode} ${created.body}`);
    }
    const [stuck] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM teams t
      WHERE t.team_id = ${team.teamId} AND t.user_count <> (SELECT count(*) FROM users u WHERE u.team_id = t.team_id)`;
    assert.equal(stuck!.n, 0, 'the counts kept agree with the rows');
  });
});

/**
 * Creates of one team that arrive together are written as one batch
 * (src/users/create.ts): one time for the batch, dense positions in the
 * list's order, the team's counters and holes as if they had come one by
 * one, a client_user_id taken (before or within the batch) answered with
 * its holder, a batch that meets another process's create of the same
 * client_user_id written again, and a refused value failing only its own
 * create.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import { createUser, type CreateResult } from '../src/users/create.js';
import { recountTeams } from '../src/users/recount.js';
import { byListOrder, teamWithKey, testSql, until } from './helpers.js';

/** The team's users in position order, and whether its counters and holes agree with them. */
async function teamState(sql: Sql, teamId: string) {
  const users = await sql<{ user_id: string; client_user_id: string; created_on: string; position: number }[]>`
    SELECT user_id, client_user_id, to_json(created_on) #>> '{}' AS created_on, position::int AS position
    FROM users WHERE team_id = ${teamId} ORDER BY position`;
  const [team] = await sql<{ next_position: string; version: string }[]>`
    SELECT next_position::text, version::text FROM teams WHERE team_id = ${teamId}`;
  // Kept as a recount finds it, and no position left unused after the last user: creates take the next ones.
  const { drifts } = await recountTeams(sql, [teamId]);
  const counted = drifts.length === 0 && Number(team!.next_position) === (users.at(-1)?.position ?? 0) + 1;
  return { users, counted, drifts, version: team!.version };
}

function assertDenseInListOrder(users: { user_id: string; created_on: string; position: number }[]): void {
  assert.deepEqual(users.map((u) => u.position), users.map((_, i) => i + 1), 'positions 1..n');
  const sorted = [...users].sort(byListOrder);
  assert.deepEqual(users.map((u) => u.user_id), sorted.map((u) => u.user_id), 'positions follow (created_on, user_id)');
}

const createdId = (r: CreateResult) => (r.created ? r.user_id : assert.fail(`not created: ${JSON.stringify(r)}`));

describe('creates written in batches', () => {
  let sql: Sql;

  before(() => {
    sql = testSql();
  });
  after(async () => {
    await sql.end();
  });

  it('creates that arrive while a batch is written go together: one time, dense positions in user_id order, counters and holes kept', async () => {
    const { teamId } = await teamWithKey(sql);
    const before = await teamState(sql, teamId);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => createUser(sql, teamId, { client_user_id: `batch-${i}`, fallback_time_zone: 'Europe/Paris' })));
    const state = await teamState(sql, teamId);
    assert.equal(state.users.length, 20);
    assert.deepEqual(new Set(state.users.map((u) => u.user_id)), new Set(results.map(createdId)));
    // The first went alone; the other 19 arrived during its flight and went as one statement.
    assert.equal(new Set(state.users.map((u) => u.created_on)).size, 2);
    assert.equal(BigInt(state.version) - BigInt(before.version), 2n);
    assertDenseInListOrder(state.users);
    assert.ok(state.counted, JSON.stringify(state.drifts));
    for (const r of results) {
      const doc = JSON.parse(r.created ? r.doc : '{}');
      assert.equal(doc.fallback_time_zone.updated_at, doc.created_on, 'the document carries the batch time');
    }
  });

  it('a client_user_id held by a live user, or by an earlier create of the batch, writes nothing and answers its holder', async () => {
    const { teamId } = await teamWithKey(sql);
    const held = createdId(await createUser(sql, teamId, { client_user_id: 'held' }));
    const [first, taken, dup1, dup2, last] = await Promise.all(['first', 'held', 'dup', 'dup', 'last'].map((id) => createUser(sql, teamId, { client_user_id: id })));
    createdId(first!);
    createdId(last!);
    assert.deepEqual(taken, { created: false, existing: { user_id: held, created_on: (await teamState(sql, teamId)).users[0]!.created_on } });
    assert.equal(dup2!.created, false);
    assert.equal(!dup2!.created && dup2!.existing.user_id, createdId(dup1!));
    const state = await teamState(sql, teamId);
    assert.deepEqual(state.users.map((u) => u.client_user_id).sort(), ['dup', 'first', 'held', 'last']);
    assertDenseInListOrder(state.users);
    assert.ok(state.counted, JSON.stringify(state.drifts));
  });

  it("a batch that meets another process's create of the same client_user_id is written again, and answers its holder", async () => {
    const { teamId } = await teamWithKey(sql);
    const other = testSql();
    const locker = testSql();
    try {
      // Both statements take their snapshot, then wait for the team's lock: the second to get it does not see the first's user.
      const results = await locker.begin(async (tx) => {
        await tx`SELECT 1 FROM teams WHERE team_id = ${teamId} FOR UPDATE`;
        const racing = [
          createUser(sql, teamId, { client_user_id: 'raced' }),
          createUser(sql, teamId, { client_user_id: 'alone' }),
          createUser(other, teamId, { client_user_id: 'raced' }),
        ];
        // Other test files create users too: count only the backends waiting, directly or not, on this transaction.
        const [{ pid }] = await tx<[{ pid: number }]>`SELECT pg_backend_pid() AS pid`;
        await until('both creates waiting for the team lock', 10_000, async () => {
          const [{ n }] = await locker<[{ n: number }]>`
            WITH RECURSIVE blocked(pid) AS (
              SELECT ${pid}::int
              UNION
              SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY(pg_blocking_pids(a.pid))
            )
            SELECT count(*)::int - 1 AS n FROM blocked`;
          return n === 2;
        });
        return racing;
      }).then((racing) => Promise.all(racing));
      const [a, alone, b] = results;
      createdId(alone!);
      const winner = a!.created ? a! : b!;
      const loser = a!.created ? b! : a!;
      assert.ok(!loser.created && loser.existing.user_id === createdId(winner), JSON.stringify(results));
      const state = await teamState(sql, teamId);
      assert.equal(state.users.length, 2);
      assertDenseInListOrder(state.users);
      assert.ok(state.counted, JSON.stringify(state.drifts));
    } finally {
      await other.end();
      await locker.end();
    }
  });

  it('a value PostgreSQL refuses fails only its own create', async () => {
    const { teamId } = await teamWithKey(sql);
    // Past the HTTP schema's checks, only PostgreSQL knows there is no 30 February.
    const results = await Promise.allSettled(['2000-01-01', '2023-02-30', '2000-01-02'].map((date, i) =>
      createUser(sql, teamId, { client_user_id: `date-${i}`, fallback_birth_date: date })));
    assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value.created : (r.reason as { code: string }).code)), [true, '22008', true]);
    const state = await teamState(sql, teamId);
    assert.deepEqual(state.users.map((u) => u.client_user_id).sort(), ['date-0', 'date-2']);
    assertDenseInListOrder(state.users);
    assert.ok(state.counted, JSON.stringify(state.drifts));
  });
});

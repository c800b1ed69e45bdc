/**
 * A team's single-statement writes that arrive while its previous one is
 * being written go to PostgreSQL together, in one transaction
 * (src/writes/team-batches.ts): the rows of a batch share its transaction
 * id, the team's state agrees with a recount, each write gets its own
 * answer, and one that PostgreSQL refuses fails alone while the rest of its
 * batch is written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import { createUser } from '../src/users/create.js';
import { deleteUser, undoDelete } from '../src/users/deletion.js';
import { patchUser } from '../src/users/patch.js';
import { recountTeams } from '../src/users/recount.js';
import { errorCode } from '../src/db/errors.js';
import { guardedTestSql, teamWithUsers, testSql, until, type TeamWithUsers } from './helpers.js';

const GRACE_MS = 86_400_000;

describe("a team's writes in batches", () => {
  let sql: Sql;
  let team: TeamWithUsers;
  const ids = () => team.users.map((u) => String(u.user_id));

  /** How many transactions wrote the rows of `table` for these users. */
  const transactions = async (table: 'users' | 'deleted_users', userIds: string[]) => {
    const [{ n }] = await sql<[{ n: number }]>`
      SELECT count(DISTINCT xmin::text)::int AS n FROM ${sql(table)} WHERE team_id = ${team.teamId} AND user_id = ANY(${userIds}::uuid[])`;
    return n;
  };
  const assertCounted = async () => {
    const { drifts } = await recountTeams(sql, [team.teamId]);
    assert.deepEqual(drifts, []);
  };

  /**
   * The answers of the writes `during` starts while another connection holds
   * the row of the user `held` (its pool and backend's pid given to
   * `during`); the row is let go once `during` returns.
   */
  const whileRowHeld = async <T>(held: string, during: (locker: Sql, lockerPid: number) => Promise<Promise<T>[]>): Promise<T[]> => {
    const locker = testSql();
    try {
      const writes = await locker.begin(async (tx) => {
        await tx`SELECT 1 FROM users WHERE user_id = ${held} FOR UPDATE`;
        const [{ pid }] = await tx<[{ pid: number }]>`SELECT pg_backend_pid() AS pid`;
        // In an object, so that nothing waits for the writes before the COMMIT that lets the row go.
        return { pending: await during(locker, pid) };
      });
      return await Promise.all(writes.pending);
    } finally {
      await locker.end();
    }
  };

  let pool: ReturnType<typeof guardedTestSql>;

  before(async () => {
    // The service's pool: one test kills a batch's connection.
    pool = guardedTestSql();
    sql = pool.sql;
    team = await teamWithUsers(sql, 32);
  });
  after(async () => {
    await pool.end();
  });

  it('deletes and undos that arrive together are written together, each answered, the team counted', async () => {
    const some = ids().slice(0, 20);
    const deleted = await Promise.all(some.map((id) => deleteUser(sql, team.teamId, id, team.keyId, GRACE_MS)));
    assert.deepEqual(deleted, some.map(() => true));
    // The first went alone; the other 19 arrived during its flight and went as one transaction.
    assert.equal(await transactions('deleted_users', some), 2);
    await assertCounted();

    const undone = await Promise.all(some.map((id) => undoDelete(sql, team.teamId, { user_id: id })));
    assert.deepEqual(undone, some.map((id) => ({ restored: id })));
    assert.equal(await transactions('users', some), 2);
    await assertCounted();
    const [{ events }] = await sql<[{ events: number }]>`
      SELECT count(*)::int AS events FROM events
      WHERE team_id = ${team.teamId} AND user_id = ANY(${some}::uuid[]) AND event_type IN ('user.deleted', 'user.restored')`;
    assert.equal(events, 40, 'one event per write');
  });

  it('a write PostgreSQL refuses fails alone, and the rest of its batch is written', async () => {
    const [first, refused, b, c] = ids().slice(20, 24) as [string, string, string, string];
    const holder = team.users.find((u) => u.user_id === refused)!.client_user_id as string;
    // The deleted user's client_user_id is taken again: its undo meets the unique index.
    assert.equal(await deleteUser(sql, team.teamId, refused, team.keyId, GRACE_MS), true);
    assert.ok((await createUser(sql, team.teamId, { client_user_id: holder })).created);
    const answers = await Promise.all([
      deleteUser(sql, team.teamId, first, team.keyId, GRACE_MS),
      undoDelete(sql, team.teamId, { user_id: refused }),
      deleteUser(sql, team.teamId, b, team.keyId, GRACE_MS),
      deleteUser(sql, team.teamId, c, team.keyId, GRACE_MS),
    ]);
    assert.deepEqual(answers, [true, 'conflict', true, true]);
    // Written again one by one after the batch was refused.
    assert.equal(await transactions('deleted_users', [b, c]), 2);
    const [{ n }] = await sql<[{ n: number }]>`SELECT count(*)::int AS n FROM deleted_users WHERE user_id = ${refused}`;
    assert.equal(n, 1, 'the refused undo left its user scheduled');
    await assertCounted();
  });

  it('two patches of one user at once are both applied', async () => {
    const [first, twice] = ids().slice(24, 26) as [string, string];
    const answers = await Promise.all([
      patchUser(sql, team.teamId, first, { fallback_time_zone: 'Europe/Paris' }),
      patchUser(sql, team.teamId, twice, { fallback_time_zone: 'Asia/Tokyo' }),
      patchUser(sql, team.teamId, twice, { fallback_birth_date: '1990-03-04' }),
    ]);
    assert.deepEqual(answers, ['patched', 'patched', 'patched']);
    const [row] = await sql<{ doc: string }[]>`SELECT doc FROM users WHERE team_id = ${team.teamId} AND user_id = ${twice}`;
    const doc = JSON.parse(row!.doc);
    assert.equal(doc.fallback_time_zone.id, 'Asia/Tokyo');
    assert.equal(doc.fallback_birth_date.value, '1990-03-04');
    const [{ events }] = await sql<[{ events: number }]>`
      SELECT count(*)::int AS events FROM events WHERE team_id = ${team.teamId} AND user_id = ${twice} AND event_type = 'user.updated'`;
    assert.equal(events, 2);
    await assertCounted();
  });

  it('a batch whose connection is lost fails every write of it, and none is run again: its commit may have been done', async () => {
    const [first, b, c] = ids().slice(26, 29) as [string, string, string];
    // b's row held: the batch [b, c] waits at b's statement, inside its transaction.
    const answers = await whileRowHeld(b, async (locker, lockerPid) => {
      const pending = [first, b, c].map((id) =>
        deleteUser(sql, team.teamId, id, team.keyId, GRACE_MS).then(() => 'deleted', (err: unknown) => errorCode(err)));
      const waiting = await until('the batch waiting for the held row', 10_000, async () => {
        const [row] = await locker<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE ${lockerPid}::int = ANY(pg_blocking_pids(pid))`;
        return row?.pid;
      });
      await locker`SELECT pg_terminate_backend(${waiting}::int)`;
      return pending;
    });
    assert.equal(answers[0], 'deleted');
    assert.equal(answers[1], answers[2], 'one failure for the whole batch');
    assert.ok(answers[1] !== 'deleted' && answers[1] !== undefined, JSON.stringify(answers));
    const [{ live }] = await sql<[{ live: number }]>`SELECT count(*)::int AS live FROM users WHERE user_id IN (${b}, ${c})`;
    assert.equal(live, 2, 'neither write was run again after its batch failed');
    await assertCounted();
  });

  it('a batch whose transaction, begun while the batch before it was out, lost its connection meanwhile is written in a new one', async () => {
    const [first, b, c] = ids().slice(29, 32) as [string, string, string];
    // first's row held: its write waits at its statement, and b's and c's wait for it, their transaction begun.
    const answers = await whileRowHeld(first, async (locker) => {
      const pending = [first, b, c].map((id) => deleteUser(sql, team.teamId, id, team.keyId, GRACE_MS));
      const begun = await until('the transaction begun for b and c', 10_000, async () => {
        const [row] = await locker<{ pid: number }[]>`
          SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction' AND query ILIKE 'begin%'`;
        return row?.pid;
      });
      // With a timeout, until the backend has exited: its socket is closed before the lock is let go.
      const [{ gone }] = await locker<[{ gone: boolean }]>`SELECT pg_terminate_backend(${begun}::int, 10000) AS gone`;
      assert.ok(gone);
      return pending;
    });
    assert.deepEqual(answers, [true, true, true]);
    assert.equal(await transactions('deleted_users', [b, c]), 1, 'b and c written together, in a new transaction');
    await assertCounted();
  });
});

/**
 * The functions the writes' statements call: an SQL function that
 * PostgreSQL cannot inline has its body planned again in every statement
 * that calls it (about 0.1 ms a call), while the statement holds its team's
 * rows; so the helpers a delete and an undo call are either inlined into
 * the statement or PL/pgSQL, which keeps its plans for the session
 * (migrations/015, docs/decisions/page-statement.md).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import { deleteUser, undoDelete } from '../src/users/deletion.js';
import { teamWithUsers, testSql } from './helpers.js';

interface FunctionCalls { name: string; language: string; calls: number }

describe('the functions a delete and its undo call', () => {
  let sql: Sql;

  before(() => {
    sql = testSql();
  });
  after(async () => {
    await sql.end();
  });

  it('are inlined into the statement or PL/pgSQL, never an SQL function run call by call', async () => {
    const team = await teamWithUsers(sql, 3);
    const victim = String(team.users[1]!.user_id);
    const called = await sql.begin(async (tx) => {
      // Calls of this transaction, counted for SQL functions too (a superuser setting: the suite's user is one).
      await tx`SET LOCAL track_functions = 'all'`;
      const writes = tx as unknown as Sql;
      assert.equal(await deleteUser(writes, team.teamId, victim, team.keyId, 60_000), true);
      assert.deepEqual(await undoDelete(writes, team.teamId, { user_id: victim }), { restored: victim });
      // The sizes (list_bucket_size() and kin, no arguments) are called once while the statement is planned, to fold them into constants.
      return tx<FunctionCalls[]>`
        SELECT p.proname AS name, l.lanname AS language, pg_stat_get_xact_function_calls(p.oid)::int AS calls
        FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.pronargs > 0 AND pg_stat_get_xact_function_calls(p.oid) > 0
        ORDER BY 1`;
    });
    assert.deepEqual(called.filter((f) => f.language === 'sql'), [], 'SQL functions run call by call');
    // The hole was opened and filled again through the thresholds' helpers: the rule was put to the test.
    const thresholds = called.filter((f) => f.name === 'list_starts_shifted' || f.name === 'list_starts_extended');
    assert.ok(thresholds.length === 2 && thresholds.every((f) => f.language === 'plpgsql'), JSON.stringify(called));
  });
});

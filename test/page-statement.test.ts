/**
 * The page statement (findUserPage in src/users/queries.ts) and the rules
 * its speed relies on: its inner range is bounded by the list's largest
 * page; PostgreSQL reads the range under the team row in a nested loop,
 * with no sort over the result (the rows' order comes from the range; a
 * first row without the team's total makes findUserPage fail, never answer
 * a page out of order); the start of a page of a team with holes is found
 * once per page, by list_page_start, whose tables the statement's own plan
 * never reads and which reads a row of each by its key, never every page
 * (test/list-compaction.test.ts checks where it starts); and
 * the plan is generic, kept across executions rather than made again for
 * each.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import postgres from 'postgres';
import type { Sql } from '../src/db/client.js';
import { findUserPage, LARGEST_PAGE } from '../src/users/queries.js';
import { ListQuery } from '../src/users/schemas.js';
import { callAs, databaseUrl, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

interface PlanNode { 'Node Type': string; 'Join Type'?: string; 'Relation Name'?: string; Plans?: PlanNode[] }

const nodeTypes = (node: PlanNode): string[] => [node['Node Type'], ...(node.Plans ?? []).flatMap(nodeTypes)];
const relations = (node: PlanNode): string[] => [...(node['Relation Name'] ? [node['Relation Name']] : []), ...(node.Plans ?? []).flatMap(relations)];

describe('the page statement', () => {
  let sql: Sql;
  let team: TeamWithUsers;
  /** A connection that records what it sends. */
  let capturing: Sql;
  const sent: { statement: string; parameters: unknown[] }[] = [];

  before(async () => {
    sql = testSql();
    team = await teamWithUsers(sql, 700);
    capturing = postgres(databaseUrl(), { max: 1, debug: (_connection, statement, parameters) => sent.push({ statement, parameters }) });
  });
  after(async () => {
    await capturing.end();
    await sql.end();
  });

  const pageStatement = async () => {
    sent.length = 0;
    await findUserPage(capturing, team.teamId, 10, 100);
    // A new connection first asks for the database's types; then the page is one statement.
    const pages = sent.filter((s) => s.statement.includes('FROM teams t'));
    assert.equal(pages.length, 1, 'one statement per page');
    return pages[0]!;
  };

  it("bounds the range it reads by the largest page, which is the list's own maximum", async () => {
    const { statement } = await pageStatement();
    assert.match(statement, new RegExp(`ORDER BY position LIMIT ${LARGEST_PAGE}\\s`));
    assert.equal(ListQuery.properties.limit.maximum, LARGEST_PAGE);
    await assert.rejects(findUserPage(sql, team.teamId, 0, LARGEST_PAGE + 1), RangeError);
    const page = await findUserPage(sql, team.teamId, 0, LARGEST_PAGE);
    assert.equal(JSON.parse(page!.body.toString()).users.length, LARGEST_PAGE);
  });

  it('reads the range under the team row, in order: a nested loop, no sort above it', async () => {
    const { statement, parameters } = await pageStatement();
    const [{ 'QUERY PLAN': [{ Plan: plan }] }] = await sql.unsafe(`EXPLAIN (FORMAT JSON) ${statement}`, parameters as postgres.ParameterOrJSON<never>[]) as unknown as [{ 'QUERY PLAN': [{ Plan: PlanNode }] }];
    assert.equal(plan['Node Type'], 'Limit');
    assert.equal(plan.Plans?.[0]?.['Node Type'], 'Nested Loop', JSON.stringify(plan));
    assert.equal(plan.Plans?.[0]?.['Join Type'], 'Left');
    // How the range itself is read (an index scan in order, or for a small table a bitmap scan and a sort) is the planner's choice.
    assert.equal(plan.Plans[0]!.Plans?.[1]?.['Node Type'], 'Limit', nodeTypes(plan).join(', '));
  });

  it('leaves the holes to list_page_start: its plan reads no table of them (planned on every page of a small limit, they cost more than the page)', async () => {
    const { statement, parameters } = await pageStatement();
    const [{ 'QUERY PLAN': [{ Plan: plan }] }] = await sql.unsafe(`EXPLAIN (FORMAT JSON) ${statement}`, parameters as postgres.ParameterOrJSON<never>[]) as unknown as [{ 'QUERY PLAN': [{ Plan: PlanNode }] }];
    assert.deepEqual(relations(plan).sort(), ['teams', 'users']);
    assert.match(statement, /list_page_start\(t\.team_id, \$\d+, t\.next_position - 1 - t\.user_count\)/);
  });

  it('keeps one generic plan across pages of any offset and size', async () => {
    const { statement } = await pageStatement();
    for (let i = 0; i < 12; i++) await findUserPage(capturing, team.teamId, (i * 97) % 700, [1, 100, 500][i % 3]!);
    const [prepared] = await capturing<{ generic_plans: string; custom_plans: string }[]>`
      SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = ${statement}`;
    assert.ok(prepared, 'the page statement is a prepared statement of the connection');
    assert.ok(Number(prepared.generic_plans) >= 7, `generic plans: ${prepared.generic_plans}, custom plans: ${prepared.custom_plans}`);
  });

  it('has the position arithmetic inlined into the statements that use it, not run as a function per call', async () => {
    // PostgreSQL inlines a STRICT SQL function only when its body calls strict functions alone (migrations/013).
    const [{ 'QUERY PLAN': [{ Plan: plan }] }] = await sql.unsafe(
      'EXPLAIN (VERBOSE, FORMAT JSON) SELECT list_block_of(list_bucket_of(p)), list_offset_of(p), list_bucket_in_block(list_bucket_of(p)) FROM generate_series(1::bigint, 3) AS p',
    ) as unknown as [{ 'QUERY PLAN': [{ Plan: PlanNode & { Output: string[] } }] }];
    assert.ok(plan.Output.length === 3 && plan.Output.every((o) => !/list_/.test(o)), plan.Output.join(', '));
  });

  /** A team of 300 users whose first three are deleted through the API (positions with holes), made once for the tests that read it. */
  let withHoles: Promise<TeamWithUsers> | undefined;
  const teamWithHoles = () => (withHoles ??= (async () => {
    const app = await testApp(sql);
    try {
      const holey = await teamWithUsers(sql, 300);
      for (const user of holey.users.slice(0, 3)) {
        assert.equal((await callAs(app, holey.key, 'DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
      }
      return holey;
    } finally {
      await app.close();
    }
  })());

  it('finds where a page of a team with holes starts once per page, not once per row', async () => {
    const holey = await teamWithHoles();
    // Function calls of this transaction, counted when track_functions covers PL/pgSQL (a superuser setting: the suite's user is one).
    const calls = await sql.begin(async (tx) => {
      await tx`SET LOCAL track_functions = 'pl'`;
      const page = await findUserPage(tx as unknown as Sql, holey.teamId, 50, 100);
      assert.equal(JSON.parse(page!.body.toString()).users.length, 100);
      const [row] = await tx<{ calls: string }[]>`SELECT pg_stat_get_xact_function_calls('list_page_start'::regproc) AS calls`;
      return Number(row!.calls);
    });
    assert.equal(calls, 1);
  });

  it('reads each table of the holes by its key, never every page of it, however small the table', async () => {
    const holey = await teamWithHoles();
    // Statistics that show the tables as the few pages they are (a table never analyzed is taken for ten pages at least),
    // then this transaction's own scans of each.
    await sql`ANALYZE list_hole_teams, list_hole_blocks, list_holes`;
    const scans = await sql.begin(async (tx) => {
      for (const offset of [0, 120, 250]) await findUserPage(tx as unknown as Sql, holey.teamId, offset, 10);
      return tx<{ relname: string; seq_scan: string; idx_scan: string }[]>`
        SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables
        WHERE relname IN ('list_hole_teams', 'list_hole_blocks', 'list_holes') ORDER BY relname`;
    });
    assert.deepEqual(scans.map((s) => s.relname), ['list_hole_blocks', 'list_hole_teams', 'list_holes']);
    for (const s of scans) {
      assert.ok(Number(s.seq_scan) === 0 && Number(s.idx_scan) >= 3, `${s.relname}: ${s.seq_scan} scans of every page, ${s.idx_scan} by key`);
    }
  });

  it('refuses a document that does not start with its own id (the audit reads the id from there)', async () => {
    const [user] = await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${team.teamId} LIMIT 1`;
    await assert.rejects(
      sql`UPDATE users SET doc = '{"user_id":"00000000-0000-4000-8000-000000000000"' || substr(doc, 50) WHERE team_id = ${team.teamId} AND user_id = ${user!.user_id}`,
      (err: postgres.PostgresError) => err.code === '23514' && err.constraint_name === 'users_doc_starts_with_id',
    );
  });
});

/**
 * Keyset paging of the Management API's team list: a page deep in 100,000
 * teams costs what the first one does. Shown without any timing: the page
 * statement (listTeamsPage, as the route sends it) is run under EXPLAIN
 * (ANALYZE, BUFFERS) for the first page and for one 90,000 teams in, and both
 * read the same few rows through the index teams_list, in order, with no
 * sort, touching about as many buffers, a tiny share of the table's pages.
 * In a database of its own, so that its 100,000 teams trouble no other test.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import postgres from 'postgres';
import type { App } from '../src/app.js';
import { connect, type Sql } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { Cursors } from '../src/management/cursor.js';
import { cursorSecret } from '../src/management/org.js';
import { listTeamsPage } from '../src/teams/team-store.js';
import { databaseUrl, testApp, testSql } from './helpers.js';
import { manage, managementKey, type Management } from './management-helpers.js';

const TEAMS = 100_000;
const DEEP = 90_000;
const PAGE = 50;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

describe('team list paging in 100,000 teams', () => {
  const name = `hds_paging_${randomBytes(6).toString('hex')}`;
  let admin: Sql;
  let sql: Sql;
  let app: App;
  let m: Management;
  let deepKey: { createdOn: string; id: string };
  /** A connection that records the statements it sends. */
  let capturing: Sql;
  const sent: { statement: string; parameters: unknown[] }[] = [];

  before(async () => {
    admin = testSql();
    await admin.unsafe(`CREATE DATABASE ${name}`);
    const url = new URL(databaseUrl());
    url.pathname = `/${name}`;
    sql = connect(url.toString(), { max: 3 });
    await migrate(sql);
    // Teams created over time, a few at the same instant (the id orders those). The ids rise with the rows'
    // order on disk: with random ids, a page whose instant straddles two heap pages read them by turns, and
    // the buffers counted below moved from run to run (4 to 7 for the same page).
    await sql`
      INSERT INTO teams (team_id, name, created_at)
      SELECT lpad(to_hex(i), 32, '0')::uuid, 'team ' || i, timestamptz '2026-01-01 00:00:00+00' + (i / 3) * interval '1 second'
      FROM generate_series(1, ${TEAMS}) AS i`;
    await sql`VACUUM ANALYZE teams`;
    const [deep] = await sql<{ created_on: string; id: string }[]>`
      SELECT to_json(created_at) #>> '{}' AS created_on, team_id AS id FROM teams ORDER BY created_at, team_id OFFSET ${DEEP - 1} LIMIT 1`;
    deepKey = { createdOn: deep!.created_on, id: deep!.id };
    app = await testApp(sql);
    m = await managementKey(sql);
    capturing = postgres(url.toString(), { max: 1, debug: (_connection, statement, parameters) => sent.push({ statement, parameters }) });
  });
  after(async () => {
    await capturing?.end();
    await app?.close();
    await sql?.end();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  /** The plan of the page statement listTeamsPage sends, run under EXPLAIN (ANALYZE, BUFFERS). */
  async function explain(after: { createdOn: string; id: string } | undefined): Promise<PlanNode> {
    sent.length = 0;
    await listTeamsPage(capturing, after, PAGE + 1);
    const pages = sent.filter((s) => s.statement.includes('FROM teams'));
    assert.equal(pages.length, 1, 'one statement per page');
    const { statement, parameters } = pages[0]!;
    const [row] = await sql.unsafe(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement}`, parameters as postgres.ParameterOrJSON<never>[]) as unknown as [{ 'QUERY PLAN': [{ Plan: PlanNode }] }];
    return row['QUERY PLAN'][0].Plan;
  }

  it('the route pages there by cursor: the page after the 90,000th team is teams 90,001 to 90,050', async () => {
    const cursor = new Cursors(await cursorSecret(sql)).encode('teams\n', deepKey);
    const res = await manage(app, m.key, 'GET', `${m.base}/team?next_cursor=${encodeURIComponent(cursor)}`);
    assert.equal(res.statusCode, 200, res.body);
    const expected = await sql<{ id: string }[]>`SELECT team_id AS id FROM teams ORDER BY created_at, team_id OFFSET ${DEEP} LIMIT ${PAGE}`;
    assert.deepEqual(res.json().teams.map((t: { id: string }) => t.id), expected.map((t) => t.id));
    assert.equal(typeof res.json().next_cursor, 'string');
  });

  it('a deep page reads what the first one does: the same rows, by the same index, no sort, about the same buffers', async () => {
    const first = await explain(undefined);
    const deep = await explain(deepKey);
    const [relpages] = await sql<{ pages: number }[]>`SELECT relpages AS pages FROM pg_class WHERE relname = 'teams'`;
    const buffers = (plan: PlanNode) => plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    for (const [what, plan] of [['first page', first], ['deep page', deep]] as const) {
      const all = nodes(plan);
      const scan = all.find((n) => n['Node Type'] === 'Index Scan');
      assert.ok(scan, `${what}: ${all.map((n) => n['Node Type']).join(' > ')}`);
      assert.equal(scan['Index Name'], 'teams_list', what);
      assert.ok(!all.some((n) => n['Node Type'] === 'Sort' || n['Node Type'] === 'Seq Scan'), `${what}: no sort, no sequential scan`);
      assert.equal(scan['Actual Rows'], PAGE + 1, `${what}: reads one page (and one row more, to know whether another follows)`);
      assert.equal(scan['Rows Removed by Filter'] ?? 0, 0, `${what}: no row read and thrown away`);
      assert.ok(buffers(plan) * 20 < relpages!.pages, `${what}: ${buffers(plan)} buffers of a ${relpages!.pages}-page table`);
    }
    // The deep page descends the index to its start instead of walking to it: at most a page or two more (a level of the tree).
    assert.ok(buffers(deep) <= buffers(first) + 2, `first page ${buffers(first)} buffers, page after ${DEEP} teams ${buffers(deep)}`);
  });
});

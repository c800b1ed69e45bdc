/**
 * The import's two ways of writing (src/import/import.ts): the bulk path that
 * rebuilds the users tables and swaps them in, and the merge. Both must give
 * stored rows whose documents are the ones their columns make (documentDrifts)
 * computes, in list order; the bulk path must lose nothing written while it
 * runs and must let readers keep reading.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { issueKey } from '../src/auth/issue-key.js';
import { createUser } from '../src/users/create.js';
import { connectDemoSource } from '../src/users/connect.js';
import { planRebuild } from '../src/db/table-rebuild.js';
import { importUsers, type ImportProgress, type ImportSummary } from '../src/import/import.js';
import { recountTeams } from '../src/users/recount.js';
import { documentDrifts } from '../src/writes/stored-documents.js';
import { generateUsers, lines, rejectsAt, teamWithKey, testApp, testSql, type TestTeam } from './helpers.js';

/** Everything stored about the given teams that a reader could see, checked against the reference definition. */
async function problems(sql: Sql, teamIds: string[]): Promise<string[]> {
  const found: string[] = [];
  for (const d of await documentDrifts(sql, { teamIds })) found.push(`document of ${d.user_id} differs from its columns`);
  const positions = await sql<{ team_id: string; n: number }[]>`
    SELECT team_id, count(*)::int AS n FROM (
      SELECT team_id, position, row_number() OVER (PARTITION BY team_id ORDER BY created_on, user_id) AS rn
      FROM users WHERE team_id = ANY(${teamIds}::uuid[])) r
    WHERE position <> rn GROUP BY team_id`;
  for (const p of positions) found.push(`team ${p.team_id}: ${p.n} users out of list order`);
  for (const d of (await recountTeams(sql, teamIds)).drifts) found.push(`team ${d.team_id}: ${d.what}: kept ${d.kept}, counted ${d.counted}`);
  return found;
}

/** The stored documents of the given users, by user_id. */
async function documents(sql: Sql, userIds: string[]): Promise<Map<string, string>> {
  const rows = await sql<{ user_id: string; doc: string }[]>`SELECT user_id, doc FROM users WHERE user_id = ANY(${userIds}::uuid[])`;
  return new Map(rows.map((r) => [r.user_id, r.doc]));
}

/** `records` with every team and user id replaced by a fresh one (consistently), and the map back. */
function withFreshIds(records: Record<string, any>[]): { records: Record<string, any>[]; original: Map<string, string> } {
  const fresh = new Map<string, string>();
  const original = new Map<string, string>();
  const id = (old: string) => {
    let next = fresh.get(old);
    if (!next) {
      next = randomUUID();
      fresh.set(old, next);
      original.set(next, old);
    }
    return next;
  };
  return { records: records.map((r) => ({ ...r, user_id: id(r.user_id), team_id: id(r.team_id) })), original };
}

/**
 * Waits until a session of this database waits for a lock in a statement on
 * teams that contains `text`; fails if `work` settles first (it never waited).
 */
async function waitForLockWait(sql: Sql, text: string, work: Promise<unknown>): Promise<void> {
  let settled = false;
  work.then(() => { settled = true; }, () => { settled = true; });
  for (;;) {
    const [w] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND strpos(query, ${text}) > 0 AND strpos(query, 'teams') > 0`;
    if (w!.n > 0) return;
    if (settled) throw new Error(`the work ended without waiting for a lock in a statement with "${text}"`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('import: bulk load and merge', () => {
  let sql: Sql;

  before(() => {
    sql = testSql();
  });
  after(async () => {
    await sql.end();
  });

  it('bulk and merge store the same rows, equal to the reference definition, in list order', async () => {
    const records = generateUsers(4000, 3);
    const bulk = await importUsers(sql, lines(records), undefined, { method: 'bulk' });
    assert.equal(bulk.method, 'bulk', bulk.bulkSkipped);
    assert.deepEqual([bulk.lines, bulk.teams, bulk.inserted, bulk.updated], [4000, 3, 4000, 0]);
    assert.equal(bulk.sourceLinksChanged, records.reduce((n, r) => n + r.connected_sources.length, 0));

    const copy = withFreshIds(records);
    const merged = await importUsers(sql, lines(copy.records), undefined, { method: 'merge' });
    assert.equal(merged.method, 'merge');
    assert.equal(merged.inserted, 4000);

    const teams = [...new Set([...records, ...copy.records].map((r) => r.team_id as string))];
    assert.deepEqual(await problems(sql, teams), []);
    // Same documents once the ids are mapped back, and the same list order in each pair of teams.
    const bulkDocs = await documents(sql, records.map((r) => r.user_id));
    const mergedDocs = await documents(sql, copy.records.map((r) => r.user_id));
    assert.equal(bulkDocs.size, 4000);
    for (const [userId, doc] of mergedDocs) {
      const back = doc.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => copy.original.get(id) ?? id);
      assert.equal(back, bulkDocs.get(copy.original.get(userId)!), userId);
    }
    const order = async (teamId: string) => (await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${teamId} ORDER BY position`).map((r) => r.user_id);
    for (const teamId of new Set(records.map((r) => r.team_id as string))) {
      const freshTeam = copy.records.find((r) => copy.original.get(r.team_id) === teamId)!.team_id;
      assert.deepEqual((await order(freshTeam)).map((id) => copy.original.get(id)), await order(teamId));
    }
  });

  it('auto merges a small file, and a file for a team that has users already', async () => {
    const team = await teamWithKey(sql);
    const first = await importUsers(sql, lines(generateUsers(50).map((u) => ({ ...u, team_id: team.teamId }))));
    assert.equal(first.method, 'merge');
    assert.match(first.bulkSkipped ?? '', /fewer than/);
    const second = await importUsers(sql, lines(generateUsers(20).map((u) => ({ ...u, team_id: team.teamId }))), undefined, { method: 'bulk' });
    assert.equal(second.method, 'merge');
    assert.match(second.bulkSkipped ?? '', /has users already/);
    assert.deepEqual(await problems(sql, [team.teamId]), []);
  });

  it('a user_id repeated in the file, or belonging to another team, is named by its line and nothing is written', async () => {
    const stored = generateUsers(3)[0]!;
    await importUsers(sql, lines([stored]));
    const records = generateUsers(300, 2);
    const twice = records.map((r, i) => (i === 200 ? { ...r, user_id: records[10]!.user_id } : r));
    await rejectsAt(importUsers(sql, lines(twice), undefined, { method: 'bulk' }), 201, /user_id .* already appears on line 11/);
    const elsewhere = records.map((r, i) => (i === 120 ? { ...r, user_id: stored.user_id } : r));
    await rejectsAt(importUsers(sql, lines(elsewhere), undefined, { method: 'bulk' }), 121, /belongs to another team/);
    const written = await sql`SELECT 1 FROM teams WHERE team_id = ANY(${[...new Set(records.map((r) => r.team_id))]}::uuid[])`;
    assert.equal(written.length, 0);
  });

  it('a file may hand client_user_ids around among stored users: a swap, and a new user taking a renamed one', async () => {
    const { records } = withFreshIds(generateUsers(3, 1));
    const [a, b, c] = records as [Record<string, any>, Record<string, any>, Record<string, any>];
    await importUsers(sql, lines([{ ...a, client_user_id: 'hand-a' }, { ...b, client_user_id: 'hand-b' }]));
    const swapped = await importUsers(sql, lines([{ ...a, client_user_id: 'hand-b' }, { ...b, client_user_id: 'hand-a' }]));
    assert.deepEqual([swapped.method, swapped.updated], ['merge', 2]);
    await importUsers(sql, lines([{ ...a, client_user_id: 'hand-c' }, { ...c, client_user_id: 'hand-b' }]));
    const rows = await sql<{ user_id: string; client_user_id: string }[]>`
      SELECT user_id, client_user_id FROM users WHERE team_id = ${a.team_id}::uuid ORDER BY client_user_id`;
    assert.deepEqual(rows.map((r) => [r.user_id, r.client_user_id]), [[b.user_id, 'hand-a'], [c.user_id, 'hand-b'], [a.user_id, 'hand-c']]);
    assert.deepEqual(await problems(sql, [a.team_id]), []);
  });

  it('keeps every user created while a bulk load runs, and each connection made to them', async () => {
    const team = await teamWithKey(sql);
    const created: string[] = [];
    let importing = true;
    const creating = (async () => {
      for (let i = 0; importing || i < 5; i++) {
        const r = await createUser(sql, team.teamId, { client_user_id: `during-bulk-${i}` });
        assert.ok(r.created);
        created.push(r.user_id);
        // A user and its connection made between the load's copy of the stored users and that of their links
        // were copied twice at the swap (a unique violation: the load fell back to merging).
        assert.equal(await connectDemoSource(sql, team.teamId, r.user_id, 'oura'), 'connected');
      }
    })();
    let summary: ImportSummary;
    try {
      summary = await importUsers(sql, lines(generateUsers(30_000, 2)), undefined, { method: 'bulk' });
    } finally {
      importing = false;
      await creating;
    }
    assert.equal(summary.method, 'bulk', summary.bulkSkipped);
    assert.ok(created.length > 5, `${created.length} creates`);
    const stored = await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${team.teamId}`;
    assert.deepEqual(stored.map((r) => r.user_id).sort(), [...created].sort());
    const [{ links }] = await sql<[{ links: number }]>`SELECT count(*)::int AS links FROM user_sources WHERE user_id = ANY(${created}::uuid[])`;
    assert.equal(links, created.length);
    assert.deepEqual(await problems(sql, [team.teamId]), []);
  });

  it("a renamed source's documents in another team wait for a create there, which may renumber that team meanwhile", async () => {
    // A source of this test's own, so that renaming it touches no other test's users.
    const slug = `rename_${randomUUID().slice(0, 8)}`;
    const source = { name: 'Before', slug, logo: `https://example.com/${slug}.png` };
    const theirs = await teamWithKey(sql);
    const stored: Record<string, any> = generateUsers(1).map((u) => ({ ...u, team_id: theirs.teamId, connected_sources: [{ created_on: u.created_on, source }] }))[0]!;
    await importUsers(sql, lines([stored]));
    const mine: Record<string, any>[] = generateUsers(1).map((u) => ({ ...u, connected_sources: [{ created_on: u.created_on, source: { ...source, name: 'After' } }] }));

    let importing: Promise<ImportSummary> | undefined;
    await sql.begin(async (create) => {
      // What a create in the other team does: its team row first...
      await create`SELECT 1 FROM teams WHERE team_id = ${theirs.teamId} FOR UPDATE`;
      importing = importUsers(sql, lines(mine));
      importing.catch(() => {});
      // The rename's lock of the teams of the source's users (src/writes/team-state.ts lockTeams).
      await waitForLockWait(sql, 'ORDER BY team_id FOR UPDATE', importing);
      // ...then, for a user that does not sort last, the positions of the team's users (queries.ts renumberTeams).
      await create`UPDATE users SET position = position WHERE user_id = ${stored.user_id}`;
    });
    const summary = await importing!;
    assert.equal(summary.inserted, 1);
    assert.match((await documents(sql, [stored.user_id])).get(stored.user_id)!, /"name":"After"/);
    assert.deepEqual(await problems(sql, [theirs.teamId, mine[0]!.team_id]), []);
  });

  it('bytes that are not UTF-8, and a line longer than a batch, are errors at their line', async () => {
    const [a, b] = generateUsers(2).map((u) => JSON.stringify(u));
    async function* bytes(...chunks: (string | Buffer)[]): AsyncGenerator<Buffer> {
      for (const c of chunks) yield typeof c === 'string' ? Buffer.from(c) : c;
    }
    await rejectsAt(importUsers(sql, bytes(`${a}\n`, Buffer.from([0x7b, 0xff, 0x7d, 0x0a]), `${b}\n`)), 2, /not valid UTF-8/);
    // The first bad line is the one reported, also when a later line of the same piece is not UTF-8.
    await rejectsAt(importUsers(sql, bytes(`${a}\n{oops\n`, Buffer.from([0x7b, 0xff, 0x7d, 0x0a]), `${b}\n`)), 2, /not valid JSON/);
    const long = JSON.stringify({ ...JSON.parse(a!), client_user_id: 'x'.repeat(3 << 20) });
    await rejectsAt(importUsers(sql, bytes(`${a}\n${b}\n`, long.slice(0, 1 << 20), long.slice(1 << 20), `\n${a}\n`)), 3, /client_user_id/);
    // One endless line (a JSON array given by mistake, say) is refused once it passes any valid user's size, not buffered whole.
    const endless = Buffer.alloc(1 << 20, 0x20);
    await rejectsAt(importUsers(sql, bytes(`${a}\n`, ...new Array<Buffer>(20).fill(endless))), 2, /line longer than 16 MiB/);
  });

  it('reports its steps in order, for a progress line: checking, writing (every user), then indexing or merging, finishing', async () => {
    for (const method of ['bulk', 'merge'] as const) {
      const records = withFreshIds(generateUsers(3000, 2)).records;
      const seen: ImportProgress[] = [];
      // One object, updated in place: a copy of each report.
      const summary = await importUsers(sql, lines(records), (p) => seen.push({ ...p }), { method });
      assert.equal(summary.method, method, summary.bulkSkipped);
      const steps = seen.map((p) => p.step).filter((step, i, all) => step !== all[i - 1]);
      assert.deepEqual(steps, ['checking', 'writing', method === 'bulk' ? 'indexing' : 'merging', 'finishing'], method);
      const writing = seen.filter((p) => p.step === 'writing');
      assert.ok(writing.every((p, i) => i === 0 || p.written >= writing[i - 1]!.written), `${method}: written only grows`);
      assert.equal(seen.at(-1)!.written, 3000, method);
      assert.equal(seen.at(-1)!.lines, 3000, method);
    }
  });

  it('a byte order mark before the first line is not part of it', async () => {
    const { records } = withFreshIds(generateUsers(2, 3));
    const summary = await importUsers(sql, (async function* () {
      yield Buffer.from(`\uFEFF${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
    })());
    assert.equal(summary.inserted, 2);
    assert.deepEqual(await problems(sql, [...new Set(records.map((r) => r.team_id as string))]), []);
  });
});

describe('table rebuild: what it refuses to copy', () => {
  it('rebuilds a plain table, and refuses one whose sequence LIKE would restart', async () => {
    const sql = testSql();
    const rollBack = new Error('roll back the probe tables');
    try {
      await assert.rejects(sql.begin(async (tx) => {
        await tx`CREATE TABLE rebuild_probe_plain (id uuid PRIMARY KEY, n int NOT NULL)`;
        await tx`CREATE TABLE rebuild_probe_identity (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY)`;
        await tx`CREATE TABLE rebuild_probe_serial (id serial PRIMARY KEY)`;
        const plain = await planRebuild(tx, 'rebuild_probe_plain');
        assert.ok('indexes' in plain, JSON.stringify(plain));
        assert.deepEqual(plain.indexes.map((i) => i.constraint?.type), ['PRIMARY KEY']);
        for (const table of ['rebuild_probe_identity', 'rebuild_probe_serial']) {
          assert.deepEqual(await planRebuild(tx, table), { impossible: `${table} has an identity or serial column attached` });
        }
        throw rollBack;
      }), (err) => err === rollBack);
    } finally {
      await sql.end();
    }
  });
});

describe('import: reading while a bulk load swaps the tables', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  let userId: string;

  before(async () => {
    sql = testSql();
    // The readers below are paced, but a slow machine could still push them past the default team limit.
    app = await testApp(sql);
    team = await teamWithKey(sql);
    const [user] = generateUsers(1).map((u): Record<string, any> => ({ ...u, team_id: team.teamId }));
    await importUsers(sql, lines([user!]));
    userId = user!.user_id;
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('readers keep getting answers, and see the new users once it is done', async () => {
    const statuses = new Map<number, number>();
    let importing = true;
    const reading = (async () => {
      while (importing) {
        for (const url of [`/v2/user/${userId}`, '/v2/user/?limit=5']) {
          const res = await app.inject({ url, headers: { 'x-service-api-key': team.key } });
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        }
        // Readers share this process with the import's coordinator: an unpaced loop would starve it.
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    const records = generateUsers(20_000, 2);
    try {
      const summary = await importUsers(sql, lines(records), undefined, { method: 'bulk' });
      assert.equal(summary.method, 'bulk', summary.bulkSkipped);
    } finally {
      importing = false;
      await reading;
    }
    assert.deepEqual([...statuses.keys()], [200], JSON.stringify([...statuses]));
    const { key } = await issueKey(sql, records[0]!.team_id, 'after the bulk load');
    const res = await app.inject({ url: `/v2/user/${records[0]!.user_id}`, headers: { 'x-service-api-key': key } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().user_id, records[0]!.user_id);
  });
});

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { importUsers } from '../src/import/import.js';
import { PageCache } from '../src/users/page-cache.js';
import type { UserPage } from '../src/users/queries.js';
import { generateUsers, lines, loggedApp, metricBySource, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

/** `source="memory"` and `source="database"` of hds_list_pages_total. */
async function pageSources(app: App): Promise<{ memory: number; database: number }> {
  return { memory: await metricBySource(app, 'hds_list_pages_total', 'memory'), database: await metricBySource(app, 'hds_list_pages_total', 'database') };
}

describe('list pages served from memory', () => {
  let sql: Sql;
  // Two instances of the service on one database, as in a deployment.
  let first: App;
  let second: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  before(async () => {
    sql = testSql();
    first = await testApp(sql);
    second = await testApp(sql);
    team = await teamWithUsers(sql, 30);
    other = await teamWithUsers(sql, 30);
  });
  after(async () => {
    await first.close();
    await second.close();
    await sql.end();
  });

  const page = async (app: App, key: string, query = '?limit=10') => {
    const res = await app.inject({ url: `/v2/user/${query}`, headers: { 'x-service-api-key': key } });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { users: { user_id: string; client_user_id: string; connected_sources: { source: { name: string } }[] }[]; total: number };
  };

  it('audits a page answered from memory like one read from the database', async () => {
    const { app: logged, lines: logLines } = await loggedApp(sql);
    try {
      const answers = [];
      for (let i = 0; i < 2; i++) answers.push(await logged.inject({ url: '/v2/user/?limit=4', headers: { 'x-service-api-key': team.key } }));
      assert.deepEqual(await pageSources(logged), { memory: 1, database: 1 });
      const audits = logLines().filter((l) => l.audit);
      assert.deepEqual(audits.map((l) => l.audit.user_ids), answers.map((a) => a.json().users.map((u: { user_id: string }) => u.user_id)));
      assert.equal(audits[1]!.audit.user_ids.length, 4);
    } finally {
      await logged.close();
    }
  });

  it('answers a repeated page from memory, with the same bytes', async () => {
    const before = await pageSources(first);
    const res1 = await first.inject({ url: '/v2/user/?limit=7&offset=3', headers: { 'x-service-api-key': team.key } });
    const res2 = await first.inject({ url: '/v2/user/?limit=7&offset=3', headers: { 'x-service-api-key': team.key } });
    assert.equal(res2.body, res1.body);
    const now = await pageSources(first);
    assert.equal(now.database - before.database, 1);
    assert.equal(now.memory - before.memory, 1);
  });

  it("never answers one team's request with another team's page of the same offset and limit", async () => {
    for (let i = 0; i < 2; i++) {
      for (const [caller, notCaller] of [[team, other], [other, team]] as const) {
        const users = (await page(first, caller.key)).users;
        assert.equal(users.length, 10);
        for (const u of users) {
          assert.ok(caller.users.some((r) => r.user_id === u.user_id) || !notCaller.users.some((r) => r.user_id === u.user_id), 'a user of the other team');
        }
      }
    }
  });

  it('shows a user created through another instance on the next read, with the new total', async () => {
    const cached = await page(first, team.key, '?limit=100');
    await page(first, team.key, '?limit=100');
    const created = await second.inject({
      method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key },
      payload: { client_user_id: `cache-${randomBytes(4).toString('hex')}` },
    });
    assert.equal(created.statusCode, 200, created.body);
    const after = await page(first, team.key, '?limit=100');
    assert.equal(after.total, cached.total + 1);
    assert.ok(after.users.some((u) => u.user_id === created.json().user_id), 'the new user is on the page');
  });

  it('shows a change made by an import on the next read', async () => {
    const cached = await page(first, team.key, '?limit=100');
    const target = cached.users[0]!;
    const record = team.users.find((u) => u.user_id === target.user_id)!;
    const renamed = { ...record, client_user_id: `${record.client_user_id}-renamed` };
    await importUsers(sql, lines([renamed]));
    const after = await page(first, team.key, '?limit=100');
    assert.equal(after.users.find((u) => u.user_id === target.user_id)?.client_user_id, renamed.client_user_id);
  });

  it("shows a source renamed by another team's import on the next read", async () => {
    // A source of this test's own, so that renaming it touches no other file's users.
    const slug = `cache_${randomBytes(4).toString('hex')}`;
    const source = { name: 'Before', slug, logo: `https://example.com/${slug}.png` };
    const mine: Record<string, any>[] = generateUsers(1).map((u) => ({ ...u, team_id: team.teamId, connected_sources: [{ created_on: u.created_on, source }] }));
    await importUsers(sql, lines(mine));
    // The whole team on one page.
    const query = '?limit=100';
    const named = (p: Awaited<ReturnType<typeof page>>) => p.users.find((u) => u.user_id === mine[0]!.user_id)?.connected_sources[0]?.source.name;
    assert.equal(named(await page(first, team.key, query)), 'Before');

    const theirs = generateUsers(1).map((u) => ({ ...u, team_id: other.teamId, connected_sources: [{ created_on: u.created_on, source: { ...source, name: 'After' } }] }));
    await importUsers(sql, lines(theirs));
    assert.equal(named(await page(first, team.key, query)), 'After');
  });

  it('with PAGE_CACHE_MB=0 reads every page from the database', async () => {
    const uncached = await testApp(sql, { PAGE_CACHE_MB: '0' });
    try {
      await page(uncached, team.key);
      await page(uncached, team.key);
      assert.deepEqual(await pageSources(uncached), { memory: 0, database: 2 });
    } finally {
      await uncached.close();
    }
  });
});

describe('PageCache', () => {
  const pageOf = (bytes: number, version = '1'): UserPage => ({ body: Buffer.alloc(bytes), auditIds: null, version });
  /** Stores a 100-byte page of team t (limit 10) at each offset, in order. */
  const storeAt = (cache: PageCache, ...offsets: number[]) => {
    for (const offset of offsets) cache.store('t', offset, 10, pageOf(100));
  };

  it('drops the least recently used pages when over its budget', () => {
    const cache = new PageCache(300);
    storeAt(cache, 0, 10, 20);
    cache.served('t', 0, 10, cache.get('t', 0, 10)!);
    // Full: a page is kept on its second miss.
    storeAt(cache, 30, 30);
    assert.ok(cache.get('t', 0, 10), 'recently served: kept');
    assert.equal(cache.get('t', 10, 10), undefined, 'least recently used: dropped');
    assert.deepEqual(cache.size, { entries: 3, bytes: 300 });
  });

  it('replaces a page of an older version and keeps no page bigger than its budget', () => {
    const cache = new PageCache(300);
    cache.store('t', 0, 10, pageOf(100, '1'));
    cache.store('t', 0, 10, pageOf(150, '2'));
    assert.equal(cache.get('t', 0, 10)?.version, '2');
    assert.deepEqual(cache.size, { entries: 1, bytes: 150 });
    cache.store('t', 10, 10, pageOf(301));
    assert.equal(cache.get('t', 10, 10), undefined);
  });

  it('once full, keeps a page only on its second miss, so that a scan of pages read once keeps the pages read again', () => {
    const cache = new PageCache(200);
    storeAt(cache, 0, 10);
    for (let offset = 20; offset < 20_000; offset += 10) storeAt(cache, offset);
    assert.ok(cache.get('t', 0, 10), 'kept through the scan');
    assert.ok(cache.get('t', 10, 10), 'kept through the scan');
    assert.equal(cache.get('t', 20, 10), undefined);

    storeAt(cache, 30, 30);
    assert.ok(cache.get('t', 30, 10), 'kept on its second miss');
    assert.equal(cache.get('t', 0, 10), undefined, 'the least recently used made room');
    assert.deepEqual(cache.size, { entries: 2, bytes: 200 });
  });

  it('remembers a bounded number of pages missed once', () => {
    const cache = new PageCache(100);
    storeAt(cache, 0, 10);
    // Far more pages missed once than it remembers: the first of them is forgotten.
    for (let offset = 20; offset < 100_000; offset += 10) storeAt(cache, offset);
    storeAt(cache, 10);
    assert.equal(cache.get('t', 10, 10), undefined, 'forgotten: this miss counts as its first');
    storeAt(cache, 10);
    assert.ok(cache.get('t', 10, 10));
  });
});

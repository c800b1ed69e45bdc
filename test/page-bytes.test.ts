/**
 * The list's answers, byte for byte: each page is compared with
 *
 * - the same page built the plainest way, from `ORDER BY position OFFSET
 *   LIMIT` and the team's counter (exact bytes, any implementation of the
 *   page read must give them);
 * - the answers of the implementation before issue 19 (rows decoded into
 *   buffers and joined), recorded in test/fixtures/page-bytes.json as
 *   SHA-256 digests. The dataset is generated with a fixed seed; its user
 *   ids (which must be fresh on every run: the test database outlives a
 *   run) and the team id are mapped back to fixed ones before hashing.
 *
 * Both with the page cache on (each page asked twice: from the database,
 * then from memory) and off, before and after deletes (holes in the
 * positions, pages found past the team's holes) and undos; and each
 * answer's audit line names exactly the users in its body, in order.
 *
 * Recording (only when the answers are meant to change, which the list's
 * contract forbids): HDS_RECORD_PAGE_BYTES=1 npm test -- test/page-bytes.test.ts
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import { ROOT, generateUsers, lines, loggedApp, teamWithKey, testSql, type TestTeam } from './helpers.js';

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'page-bytes.json');
const RECORD = process.env.HDS_RECORD_PAGE_BYTES === '1';
const SEED = 190_001;
const USERS = 1_234;
/** Stands for the run's team id in the recorded digests. */
const FIXED_TEAM = '00000000-0000-4000-8000-0000000000ee';

/** Users whose documents hold what JSON escapes or encodes in several bytes. */
const UNUSUAL = [
  'quote " and backslash \\',
  'ünïcödé and 漢字',
  'emoji 🩺 and a surrogate pair 𝄞',
  'line\u2028separator',
  '</script><script>',
].map((client_user_id, i) => ({
  user_id: `0000000${i}-0000-4000-8000-000000000000`,
  client_user_id,
  created_on: `2023-06-0${i + 1}T00:00:00.${i}00001+00:00`,
  connected_sources: [],
  fallback_time_zone: { id: 'Europe/Berlin', source_slug: 'manual', updated_at: '2023-06-01T00:00:00+00:00' },
  fallback_birth_date: null,
  ingestion_start: null,
  ingestion_end: null,
}));

const OFFSETS = (total: number) => [0, 1, 99, 255, 256, 257, 511, 512, 600, total - 500, total - 100, total - 7, total - 1, total, total + 5].filter((o) => o >= 0);
const LIMITS = [1, 7, 100, 500];

describe('list answers, byte for byte', () => {
  let sql: Sql;
  let cached: { app: App; lines: () => Record<string, any>[] };
  let uncached: { app: App; lines: () => Record<string, any>[] };
  let team: TestTeam;
  /** Fresh id of this run -> the generator's (fixed) id. */
  const fixedIdOf = new Map<string, string>();
  const recorded: Record<string, string> = RECORD ? {} : JSON.parse(fs.readFileSync(FIXTURE, 'utf8'));
  const seen = new Set<string>();

  before(async () => {
    sql = testSql();
    cached = await loggedApp(sql);
    uncached = await loggedApp(sql, { PAGE_CACHE_MB: '0' });
    team = await teamWithKey(sql, 'page bytes');
    const users = [...generateUsers(USERS, 1, SEED), ...UNUSUAL].map((u) => {
      const fresh = randomUUID();
      fixedIdOf.set(fresh, u.user_id);
      return { ...u, user_id: fresh, team_id: team.teamId };
    });
    await importUsers(sql, lines(users));
  });
  after(async () => {
    if (RECORD) {
      fs.mkdirSync(path.dirname(FIXTURE), { recursive: true });
      fs.writeFileSync(FIXTURE, `${JSON.stringify(recorded, null, 1)}\n`);
    }
    await cached?.app.close();
    await uncached?.app.close();
    await sql?.end();
  });

  /** The page as the plainest statement reads it: the answer's exact bytes. */
  async function expectedBody(offset: number, limit: number): Promise<Buffer> {
    const [{ user_count }] = await sql<[{ user_count: string }]>`SELECT user_count FROM teams WHERE team_id = ${team.teamId}`;
    const docs = await sql`SELECT doc FROM users WHERE team_id = ${team.teamId} ORDER BY position OFFSET ${offset} LIMIT ${limit}`.raw();
    return Buffer.concat([
      Buffer.from('{"users":['),
      ...docs.flatMap((row, i) => (i === 0 ? [row[0] as Buffer] : [Buffer.from(','), row[0] as Buffer])),
      Buffer.from(`],"total":${user_count},"offset":${offset},"limit":${limit}}`),
    ]);
  }

  const fixed = (body: string) => body.replaceAll(team.teamId, FIXED_TEAM).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => fixedIdOf.get(id) ?? id);
  const digest = (body: Buffer) => createHash('sha256').update(fixed(body.toString('utf8'))).digest('hex');

  async function checkPages(stage: string): Promise<void> {
    const [{ user_count: total }] = await sql<[{ user_count: number }]>`SELECT user_count::int FROM teams WHERE team_id = ${team.teamId}`;
    const queries = [
      { label: 'default', query: '', offset: 0, limit: 100 },
      ...[0, 100].map((offset) => ({ label: `limit 0 offset ${offset}`, query: `?limit=0&offset=${offset}`, offset, limit: 0 })),
      ...LIMITS.flatMap((limit) => OFFSETS(total).map((offset) => ({ label: `limit ${limit} offset ${offset}`, query: `?limit=${limit}&offset=${offset}`, offset, limit }))),
    ];
    for (const q of queries) {
      const expected = await expectedBody(q.offset, q.limit);
      const key = `${stage}: ${q.label}`;
      for (const [name, logged] of [['cache on, first', cached], ['cache on, again', cached], ['cache off', uncached]] as const) {
        const before = logged.lines().length;
        const res = await logged.app.inject({ url: `/v2/user/${q.query}`, headers: { 'x-service-api-key': team.key } });
        assert.equal(res.statusCode, 200, `${key} (${name}): ${res.body}`);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
        assert.ok(res.rawPayload.equals(expected), `${key} (${name}): the body differs from the plain statement's page`);
        if (RECORD) recorded[key] = digest(res.rawPayload);
        else assert.equal(digest(res.rawPayload), recorded[key], `${key} (${name}): the body differs from the recorded answer`);
        seen.add(key);
        const ids = res.json().users.map((u: { user_id: string }) => u.user_id);
        const line = logged.lines().slice(before).find((l) => l.msg === 'request');
        assert.ok(line, `${key} (${name}): no request line`);
        assert.deepEqual(line.audit?.user_ids ?? [], ids, `${key} (${name}): the audit names the users returned`);
      }
    }
  }

  it('as imported', async () => {
    await checkPages('imported');
  });

  it('after deleting every seventh user and undoing some of the deletes', async () => {
    const ids = (await sql`SELECT user_id FROM users WHERE team_id = ${team.teamId} ORDER BY position`).map((r) => r.user_id as string);
    const doomed = ids.filter((_, i) => i % 7 === 3);
    for (const id of doomed) {
      const res = await cached.app.inject({ method: 'DELETE', url: `/v2/user/${id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 200, res.body);
    }
    await checkPages('deleted');
    for (const id of doomed.filter((_, i) => i % 3 === 0)) {
      const res = await cached.app.inject({ method: 'POST', url: `/v2/user/undo_delete?user_id=${id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 200, res.body);
    }
    await checkPages('undone');
  });

  it('every recorded answer was asked for', () => {
    if (!RECORD) assert.deepEqual([...seen].sort(), Object.keys(recorded).sort());
  });
});

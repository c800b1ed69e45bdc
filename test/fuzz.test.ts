/**
 * Property and fuzz tests (fast-check): arbitrary requests never get a 5xx
 * and every error has the contract's shape; a user is readable if and only
 * if the key's team owns it; pages obey the contract for any limit/offset.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { byListOrder, teamWithKey, testApp, testSql, type TestTeam } from './helpers.js';

/** Out of the way: these tests send thousands of requests from one address. */
const LOCS = ['path', 'query', 'header', 'body'];

/** Asserts the contract's error shape (section 6) on any answer of 400 or more. */
function assertErrorShape(res: LightMyRequestResponse, method: string): void {
  assert.ok(res.statusCode < 500, `${res.statusCode} ${res.body}`);
  if (res.statusCode < 400 || method === 'HEAD') return;
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = res.json() as { detail: unknown };
  assert.deepEqual(Object.keys(body), ['detail']);
  if (res.statusCode === 422) {
    assert.ok(Array.isArray(body.detail) && body.detail.length > 0);
    for (const item of body.detail as { type: unknown; loc: unknown[]; msg: unknown }[]) {
      assert.equal(typeof item.type, 'string');
      assert.equal(typeof item.msg, 'string');
      assert.ok(Array.isArray(item.loc) && LOCS.includes(item.loc[0] as string), JSON.stringify(item));
      assert.ok('input' in item);
    }
  } else if (res.statusCode !== 400) {
    assert.equal(typeof body.detail, 'string', res.body);
  }
  if (res.statusCode === 401) assert.ok(res.headers['www-authenticate']);
  if (res.statusCode === 405) assert.ok(res.headers.allow);
}

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 });
const anyText = fc.string({ unit: 'grapheme', maxLength: 60 });

describe('fuzz and properties', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  let userId: string;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithKey(sql);
    const created = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: 'fuzz-user' } });
    userId = created.json().user_id;
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('never answers 5xx, and always with the error shape, to random paths, queries, headers and bodies', async () => {
    const path = fc.oneof(
      fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
      fc.constantFrom('/v2/user/', '/v2/user', '/v2/user/resolve/', '/v2/users', '/v2//user/'),
      anyText.map((s) => `/v2/user/${encodeURIComponent(s)}`),
      anyText.map((s) => `/v2/user/resolve/${encodeURIComponent(s)}`),
      fc.uuid().map((u) => `/v2/user/${u}`),
      fc.constant(null).map(() => `/v2/user/${userId}`),
    );
    const query = fc.oneof(
      fc.constant(''),
      fc.webQueryParameters().map((q) => `?${q}`),
      fc.record({ limit: fc.oneof(printable, fc.integer().map(String)), offset: fc.oneof(printable, fc.integer().map(String)) }, { requiredKeys: [] })
        .map((q) => `?${new URLSearchParams(q as Record<string, string>)}`),
    );
    const key = fc.oneof(fc.constant(undefined), fc.constant(null).map(() => team.key), printable, printable.map((s) => `hds_${s}`));
    const body = fc.oneof(
      fc.constant(undefined),
      fc.json(),
      anyText,
      fc.record({ client_user_id: fc.oneof(anyText, fc.integer(), fc.constant(null)), fallback_time_zone: anyText, fallback_birth_date: printable, ingestion_start: printable, ingestion_end: printable, extra: fc.jsonValue() }, { requiredKeys: [] })
        .map((o) => JSON.stringify(o)),
    );
    const request = fc.record({
      method: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') as fc.Arbitrary<'GET'>,
      path, query, key, body,
      contentType: fc.oneof(fc.constant(undefined), fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', 'multipart/form-data'), printable),
      requestId: fc.oneof(fc.constant(undefined), printable),
      accept: fc.oneof(fc.constant(undefined), printable),
    });

    await fc.assert(fc.asyncProperty(request, async (r) => {
      const headers: Record<string, string> = {};
      if (r.key !== undefined) headers['x-service-api-key'] = r.key;
      if (r.contentType !== undefined) headers['content-type'] = r.contentType;
      if (r.requestId !== undefined) headers['x-request-id'] = r.requestId;
      if (r.accept !== undefined) headers.accept = r.accept;
      const withBody = r.body !== undefined && !['GET', 'HEAD'].includes(r.method);
      const res = await app.inject({ method: r.method, url: r.path + r.query, headers, ...(withBody ? { payload: r.body } : {}) });
      assertErrorShape(res, r.method);
    }), { numRuns: 300 });
  });

  it('never answers 5xx, nor in another shape, to deep nesting, NUL and surrogates in every field and parameter, and malformed URLs', async () => {
    // Text PostgreSQL cannot store, mixed into ordinary text.
    const hostile = fc.tuple(anyText, fc.constantFrom('\u0000', '\ud800', '\udfff', '\udc00\ud800', '\u0000\ud83d'), anyText).map(([a, h, b]) => a + h + b);
    /** Percent-encoded as the bytes a client would send: a lone surrogate as its (invalid) three UTF-8 bytes. */
    const asPath = (text: string) => [...text].map((c) => {
      const code = c.charCodeAt(0);
      if (c.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`;
      return encodeURIComponent(c);
    }).join('');
    const malformed = fc.constantFrom('%', '%FF', '%E0%A4%A', '%C0%80', '%ED%A0%80', '%25%', `${'x'.repeat(3100)}`, '%00');
    const segment = fc.oneof(hostile.map(asPath), malformed, fc.uuid());
    const path = fc.oneof(
      segment.map((s) => `/v2/user/${s}`),
      segment.map((s) => `/v2/user/resolve/${s}`),
      segment.map((s) => `/v2/user/providers/${s}`),
      fc.tuple(segment, segment).map(([u, p]) => `/v2/user/${u}/${p}`),
      fc.constant(null).map(() => `/v2/user/${userId}`),
      fc.constantFrom('/v2/user/', '/v2/user/undo_delete', '/v2/team/users/search', '/v2/user/metrics'),
    );
    const query = fc.oneof(
      fc.constant(''),
      fc.tuple(fc.constantFrom('query_id', 'client_user_id', 'user_id', 'limit', 'offset'), fc.oneof(hostile.map(asPath), malformed)).map(([k, v]) => `?${k}=${v}`),
    );
    const field = fc.oneof(hostile, anyText, fc.constant(null));
    const nested = fc.integer({ min: 60, max: 6000 }).chain((depth) => fc.constantFrom(
      `${'['.repeat(depth)}${']'.repeat(depth)}`,
      `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
      `{"client_user_id":${'['.repeat(depth)}${']'.repeat(depth)}}`,
    ));
    const body = fc.oneof(
      fc.record({ client_user_id: field, fallback_time_zone: field, fallback_birth_date: field, ingestion_start: field, ingestion_end: field }, { requiredKeys: [] })
        .map((o) => JSON.stringify(o)),
      fc.tuple(hostile, fc.jsonValue()).map(([k, v]) => JSON.stringify({ [k]: v, client_user_id: 'fuzz-ok' })),
      nested,
    );
    const request = fc.record({
      method: fc.constantFrom('GET', 'HEAD', 'POST', 'PATCH', 'DELETE', 'PUT', 'TRACE', 'PROPFIND', 'SEARCH', 'MKCOL', 'QUERY', 'LOCK') as fc.Arbitrary<'GET'>,
      path, query, body,
    });
    await fc.assert(fc.asyncProperty(request, async (r) => {
      const withBody = !['GET', 'HEAD', 'TRACE'].includes(r.method);
      const res = await app.inject({
        method: r.method, url: r.path + r.query,
        headers: { 'x-service-api-key': team.key, ...(withBody ? { 'content-type': 'application/json' } : {}) },
        ...(withBody ? { payload: r.body } : {}),
      });
      assertErrorShape(res, r.method);
      assert.ok(res.headers['x-request-id'] && res.headers['cache-control'] === 'no-store' && res.headers['x-content-type-options'] === 'nosniff', 'the headers of every answer');
    }), { numRuns: 300 });
  });

  it('lets a key read a user if and only if its team owns the user', async () => {
    await fc.assert(fc.asyncProperty(
      // Teams with their users' client_user_ids (distinct within a team, possibly shared across teams).
      // A letter first: all-digit ids can look like phone numbers, which the contract refuses.
      fc.array(fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,11}$/), { maxLength: 3 }), { minLength: 2, maxLength: 3 }),
      fc.nat(), fc.nat(),
      async (teamsSpec, pickKey, pickUser) => {
        const teams = await Promise.all(teamsSpec.map(async (clientIds) => {
          const t = await teamWithKey(sql);
          const users = [];
          for (const clientUserId of clientIds) {
            const res = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': t.key }, payload: { client_user_id: clientUserId } });
            assert.equal(res.statusCode, 200, res.body);
            users.push({ userId: res.json().user_id as string, clientUserId, teamId: t.teamId });
          }
          return { ...t, users };
        }));
        const all = teams.flatMap((t) => t.users);
        const caller = teams[pickKey % teams.length]!;
        const headers = { 'x-service-api-key': caller.key };
        const notFound = (await app.inject({ url: '/v2/user/00000000-0000-4000-8000-000000000000', headers })).body;
        for (const user of all.length > 0 ? [all[pickUser % all.length]!, ...all] : []) {
          const byId = await app.inject({ url: `/v2/user/${user.userId}`, headers });
          const owns = user.teamId === caller.teamId;
          assert.equal(byId.statusCode, owns ? 200 : 404);
          if (owns) assert.equal(byId.json().team_id, caller.teamId);
          else assert.equal(byId.body, notFound, "another team's user is answered like an unknown id");
          // By client_user_id: found only within the caller's team, whoever else uses the same id.
          const resolved = await app.inject({ url: `/v2/user/resolve/${encodeURIComponent(user.clientUserId)}`, headers });
          const mine = caller.users.find((u) => u.clientUserId === user.clientUserId);
          assert.equal(resolved.statusCode, mine ? 200 : 404);
          if (mine) assert.equal(resolved.json().user_id, mine.userId);
        }
        const listed = await app.inject({ url: '/v2/user/?limit=500', headers });
        assert.deepEqual(listed.json().users.map((u: { user_id: string }) => u.user_id).sort(), caller.users.map((u) => u.userId).sort());
      },
    ), { numRuns: 25 });
  });

  it('obeys the page contract for any limit and offset', async () => {
    const pager = await teamWithKey(sql);
    const headers = { 'x-service-api-key': pager.key };
    for (let i = 0; i < 23; i++) {
      const res = await app.inject({ method: 'POST', url: '/v2/user/', headers, payload: { client_user_id: `page-${i}` } });
      assert.equal(res.statusCode, 200);
    }
    const everyone = (await app.inject({ url: '/v2/user/?limit=500', headers })).json().users as { user_id: string; created_on: string }[];
    assert.equal(everyone.length, 23);
    assert.deepEqual(everyone, [...everyone].sort(byListOrder), 'ordered by created_on, then user_id');

    const number = fc.oneof(fc.integer({ min: -3, max: 30 }), fc.integer({ min: 490, max: 510 }), fc.integer(), fc.maxSafeNat());
    await fc.assert(fc.asyncProperty(fc.option(number), fc.option(number), async (limit, offset) => {
      const params = new URLSearchParams();
      if (limit !== null) params.set('limit', String(limit));
      if (offset !== null) params.set('offset', String(offset));
      const res = await app.inject({ url: `/v2/user/?${params}`, headers });
      const l = limit ?? 100;
      const o = offset ?? 0;
      if (l < 0 || l > 500 || o < 0) {
        assert.equal(res.statusCode, 422, `limit=${limit} offset=${offset}: ${res.body}`);
        for (const item of res.json().detail) assert.ok(['limit', 'offset'].includes(item.loc[1]) && item.loc[0] === 'query');
        return;
      }
      assert.equal(res.statusCode, 200, `limit=${limit} offset=${offset}: ${res.body}`);
      const page = res.json();
      assert.deepEqual(Object.keys(page).sort(), ['limit', 'offset', 'total', 'users']);
      assert.equal(page.total, 23);
      assert.equal(page.limit, l);
      assert.equal(page.offset, o);
      assert.deepEqual(page.users.map((u: { user_id: string }) => u.user_id), everyone.slice(o, o + l).map((u) => u.user_id));
    }), { numRuns: 200 });
  });
});

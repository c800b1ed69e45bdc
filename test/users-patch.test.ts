/** PATCH /v2/user/{user_id}: contract sections 6 and 8 (and the wording it shares with create, section 5). */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { documentDrifts } from '../src/writes/stored-documents.js';
import { appWithTwoTeams, comparableHeaders, type TeamWithUsers } from './helpers.js';

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$/;
const GONE = { detail: 'The user does not or no longer exists in this team' };
const SCHEDULED = { detail: 'The user has been scheduled for deletion as per your previous request' };
const NOT_AN_OBJECT = { type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from' };
const DATE_FIELDS = ['fallback_birth_date', 'ingestion_start', 'ingestion_end'] as const;

/** A date `days` from today (UTC), as YYYY-MM-DD. */
const dayFromToday = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
const unique = (prefix: string) => `${prefix}-${randomUUID()}`;

describe('PATCH /v2/user/{user_id}', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(30, 5, (f) => ({ sql, app, team, other } = f));

  type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
  const call = (method: Method, url: string, payload?: unknown, key = team.key, headers: Record<string, string> = {}) =>
    app.inject({
      method, url, headers: { 'x-service-api-key': key, ...headers },
      ...(payload === undefined ? {} : typeof payload === 'string' ? { payload } : { payload: payload as object }),
    });
  const patch = (userId: string, body: unknown, key = team.key) =>
    typeof body === 'string'
      ? call('PATCH', `/v2/user/${userId}`, body, key, { 'content-type': 'application/json' })
      : call('PATCH', `/v2/user/${userId}`, body, key);
  const get = async (userId: string, key = team.key) => {
    const res = await call('GET', `/v2/user/${userId}`, undefined, key);
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  };
  /** A new user of the team, created through the API; `body` adds values. */
  const fresh = async (body: Record<string, unknown> = {}) => {
    const res = await call('POST', '/v2/user/', { client_user_id: unique('patch'), ...body });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as Record<string, any>;
  };
  const withSources = () => team.users.find((u) => u.connected_sources.length >= 2)!;

  function assertNoContent(res: LightMyRequestResponse, what = ''): void {
    assert.equal(res.statusCode, 204, `${what} ${res.body}`);
    assert.equal(res.body, '', 'a 204 has no body');
  }
  function assertProblems(res: LightMyRequestResponse, expected: { type: string; loc: string[] }[], what = ''): Record<string, any>[] {
    assert.equal(res.statusCode, 422, `${what} ${res.body}`);
    const items = res.json().detail as Record<string, any>[];
    assert.ok(Array.isArray(items), res.body);
    assert.deepEqual(items.map((i) => ({ type: i.type, loc: i.loc })), expected, `${what} ${res.body}`);
    return items;
  }

  describe('the user first', () => {
    it("answers an unknown user and another team's user identically, with 404", async () => {
      const theirsBefore = await get(other.users[0]!.user_id, other.key);
      const unknown = await patch(randomUUID(), { fallback_time_zone: 'UTC' });
      const foreign = await patch(other.users[0]!.user_id, { fallback_time_zone: 'UTC' });
      assert.deepEqual([unknown.statusCode, unknown.json()], [404, GONE]);
      assert.deepEqual([foreign.statusCode, foreign.json()], [404, GONE]);
      assert.equal(foreign.body, unknown.body);
      assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
      assert.deepEqual(await get(other.users[0]!.user_id, other.key), theirsBefore, "another team's user is untouched");
    });

    it("patches sent together, to both teams' users and across teams, each change their own user alone", async () => {
      // Sent at once, their reads of the users share queries (src/users/batched-lookups.ts): a batch mixes teams and users.
      const mine = team.users.slice(5, 11).map((u) => String(u.user_id));
      const theirs = other.users.slice(1, 4).map((u) => String(u.user_id));
      const zones = ['Europe/Paris', 'Asia/Tokyo', 'America/Lima', 'Africa/Cairo', 'Australia/Perth', 'Europe/Oslo'];
      const theirsBefore = await Promise.all(theirs.map((id) => get(id, other.key)));
      const answers = await Promise.all([
        ...mine.map((id, i) => patch(id.toUpperCase(), { fallback_time_zone: zones[i] })),
        ...theirs.map((id) => patch(id, { fallback_birth_date: '1990-01-02' }, other.key)),
        ...theirs.map((id) => patch(id, { fallback_time_zone: 'Pacific/Auckland' })),
      ]);
      assert.deepEqual(answers.map((a) => a.statusCode), [...mine.map(() => 204), ...theirs.map(() => 204), ...theirs.map(() => 404)]);
      for (const [i, id] of mine.entries()) assert.equal((await get(id)).fallback_time_zone?.id, zones[i], id);
      for (const [i, id] of theirs.entries()) {
        const user = await get(id, other.key);
        assert.equal(user.fallback_birth_date?.value, '1990-01-02', id);
        assert.deepEqual(user.fallback_time_zone, theirsBefore[i].fallback_time_zone, "another team's key changed nothing");
      }
    });

    it('answers a user scheduled for deletion with the upstream 404', async () => {
      const user = await fresh();
      assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
      const res = await patch(user.user_id, { fallback_time_zone: 'UTC' });
      assert.deepEqual([res.statusCode, res.json()], [404, SCHEDULED]);
    });

    it("answers another team's user scheduled for deletion like an unknown one, not as scheduled", async () => {
      const theirs = other.users[4]!;
      assert.equal((await call('DELETE', `/v2/user/${theirs.user_id}`, undefined, other.key)).statusCode, 200);
      const res = await patch(theirs.user_id, { fallback_time_zone: 'UTC' });
      assert.deepEqual([res.statusCode, res.json()], [404, GONE]);
      const mine = await patch(theirs.user_id, { fallback_time_zone: 'UTC' }, other.key);
      assert.deepEqual([mine.statusCode, mine.json()], [404, SCHEDULED], 'its own team is told');
    });

    it('answers the 404 before any problem of the body', async () => {
      const scheduled = await fresh();
      assert.equal((await call('DELETE', `/v2/user/${scheduled.user_id}`)).statusCode, 200);
      const bodies: unknown[] = [
        {}, { colour: 'blue' }, '[]', '"abc"', '42', 'null',
        { fallback_time_zone: 'Foo/Bar' }, { fallback_birth_date: 'not-a-date' }, { fallback_birth_date: dayFromToday(30) },
        { client_user_id: null }, { client_user_id: 'jane.doe@example.com' }, { ingestion_start: '2024-06-01', ingestion_end: '2024-01-01' },
        { client_user_id: team.users[0]!.client_user_id },
      ];
      for (const body of bodies) {
        const what = JSON.stringify(body);
        for (const id of [randomUUID(), other.users[1]!.user_id]) {
          const res = await patch(id, body);
          assert.deepEqual([res.statusCode, res.json()], [404, GONE], `${what} on ${id}`);
        }
        const res = await patch(scheduled.user_id, body);
        assert.deepEqual([res.statusCode, res.json()], [404, SCHEDULED], `${what} on a scheduled user`);
      }
    });

    it('answers a malformed user_id with 422 at path.user_id', async () => {
      for (const id of ['not-a-uuid', '12345', `${randomUUID().slice(1)}x`]) {
        for (const body of [{ fallback_time_zone: 'UTC' }, {}]) {
          const res = await patch(id, body);
          assert.equal(res.statusCode, 422, `${id}: ${res.body}`);
          assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['path', 'user_id']], res.body);
        }
      }
    });

    it('wants a key before anything else', async () => {
      const res = await app.inject({ method: 'PATCH', url: `/v2/user/${team.users[0]!.user_id}`, payload: { fallback_time_zone: 'UTC' } });
      assert.equal(res.statusCode, 401);
      const unknown = await app.inject({ method: 'PATCH', url: `/v2/user/${randomUUID()}`, payload: {} });
      assert.equal(unknown.statusCode, 401);
    });
  });

  describe('the body', () => {
    it('refuses a body that is not a JSON object with 422 model_attributes_type, before "Nothing to patch"', async () => {
      const user = await fresh();
      for (const payload of ['[]', '"abc"', '42', 'null', '[{"fallback_time_zone":"UTC"}]']) {
        const res = await patch(user.user_id, payload);
        assert.equal(res.statusCode, 422, `${payload}: ${res.body}`);
        assert.deepEqual(res.json().detail, [{ ...NOT_AN_OBJECT, input: JSON.parse(payload) }], payload);
      }
    });

    it('refuses a request without a body with 422 at loc ["body"], as create does, never a 500', async () => {
      // Repro: PATCH /v2/user/{an existing user} with a key and no body at all (no content-type).
      const user = await fresh();
      const created = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key } });
      assert.equal(created.statusCode, 422, created.body);
      const res = await app.inject({ method: 'PATCH', url: `/v2/user/${user.user_id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 422, res.body);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['body']], res.body);
      assert.equal(res.json().detail[0].type, created.json().detail[0].type, 'the same item as create');
    });

    it('answers 400 "Nothing to patch" when no patchable field is present', async () => {
      const user = await fresh({ fallback_time_zone: 'Europe/Paris' });
      const before = await get(user.user_id);
      for (const body of [{}, { colour: 'blue' }, { user_id: randomUUID(), team_id: other.teamId, created_on: '2020-01-01T00:00:00+00:00' }]) {
        const res = await patch(user.user_id, body);
        assert.deepEqual([res.statusCode, res.json()], [400, { detail: 'Nothing to patch' }], JSON.stringify(body));
      }
      assert.deepEqual(await get(user.user_id), before);
    });

    it('counts a field sent as null as present', async () => {
      const user = await fresh();
      for (const field of ['fallback_time_zone', 'fallback_birth_date', 'ingestion_start', 'ingestion_end']) {
        assertNoContent(await patch(user.user_id, { [field]: null }), field);
      }
      // client_user_id: null is present too: a 422, not a 400.
      const res = await patch(user.user_id, { client_user_id: null });
      assert.equal(res.statusCode, 422, res.body);
    });
  });

  describe('values', () => {
    it('refuses a bad time zone with the upstream item', async () => {
      const user = await fresh({ fallback_time_zone: 'Asia/Tokyo' });
      const res = await patch(user.user_id, { fallback_time_zone: 'Foo/Bar' });
      assert.equal(res.statusCode, 422, res.body);
      assert.deepEqual(res.json(), { detail: [{
        type: 'value_error', loc: ['body', 'fallback_time_zone'], msg: 'Value error, Invalid IANA time zone: Foo/Bar', input: 'Foo/Bar',
      }] });
      assert.equal((await get(user.user_id)).fallback_time_zone.id, 'Asia/Tokyo', 'nothing changed');
    });

    for (const field of DATE_FIELDS) {
      it(`refuses a ${field} that is not a date with date_from_datetime_parsing`, async () => {
        const user = await fresh();
        for (const value of ['not-a-date', '2023-02-29', '1980-3-13', '13/03/1980', '2024-01-01T00:00:00Z', '']) {
          const items = assertProblems(await patch(user.user_id, { [field]: value }), [{ type: 'date_from_datetime_parsing', loc: ['body', field] }], value);
          assert.equal(items[0]!.input, value);
        }
        assert.equal((await get(user.user_id))[field], null, 'nothing changed');
      });
    }

    it('refuses a birth date in the future with date_past', async () => {
      const user = await fresh({ fallback_birth_date: '1980-03-13' });
      for (const value of [dayFromToday(2), dayFromToday(400)]) {
        const items = assertProblems(await patch(user.user_id, { fallback_birth_date: value }), [{ type: 'date_past', loc: ['body', 'fallback_birth_date'] }], value);
        assert.equal(items[0]!.input, value);
      }
      assertNoContent(await patch(user.user_id, { fallback_birth_date: dayFromToday(-1) }));
      assert.equal((await get(user.user_id)).fallback_birth_date.value, dayFromToday(-1));
    });

    it('refuses a value that is not a string', async () => {
      const user = await fresh();
      for (const field of ['fallback_time_zone', ...DATE_FIELDS, 'client_user_id']) {
        const res = await patch(user.user_id, { [field]: 12 });
        assert.equal(res.statusCode, 422, `${field}: ${res.body}`);
        assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['body', field]]);
      }
    });

    it('lists every problem of the body', async () => {
      const user = await fresh();
      const res = await patch(user.user_id, { fallback_time_zone: 'Foo/Bar', fallback_birth_date: 'nope', ingestion_end: 'never' });
      assert.equal(res.statusCode, 422, res.body);
      const locs = res.json().detail.map((i: { loc: string[] }) => i.loc.join('.')).sort();
      assert.deepEqual(locs, ['body.fallback_birth_date', 'body.fallback_time_zone', 'body.ingestion_end']);
    });

    it('refuses client_user_id: null with the upstream item at loc ["body"]', async () => {
      const user = await fresh();
      const res = await patch(user.user_id, { client_user_id: null });
      assert.equal(res.statusCode, 422, res.body);
      const { detail } = res.json();
      assert.equal(detail.length, 1, res.body);
      assert.deepEqual({ type: detail[0].type, loc: detail[0].loc, msg: detail[0].msg },
        { type: 'value_error', loc: ['body'], msg: 'Value error, client_user_id is not a field that can be reset to null.' });
      // With another bad value, both are listed.
      const both = await patch(user.user_id, { client_user_id: null, fallback_time_zone: 'Foo/Bar' });
      assert.equal(both.statusCode, 422, both.body);
      assert.deepEqual(both.json().detail.map((i: { loc: string[] }) => i.loc.join('.')).sort(), ['body', 'body.fallback_time_zone']);
      assert.equal((await get(user.user_id)).client_user_id, user.client_user_id);
    });

    it('refuses a client_user_id that create refuses', async () => {
      const user = await fresh();
      for (const value of ['', 'jane.doe@example.com', '+44 20 7946 0958', 'abc\u0001def', 'x'.repeat(256)]) {
        const res = await patch(user.user_id, { client_user_id: value });
        assert.equal(res.statusCode, 422, `${JSON.stringify(value)}: ${res.body}`);
        assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['body', 'client_user_id']]);
      }
      assert.equal((await get(user.user_id)).client_user_id, user.client_user_id);
    });

    it('checks ingestion_start against the stored ingestion_end, and the other way round', async () => {
      const user = await fresh();
      assertNoContent(await patch(user.user_id, { ingestion_end: '2024-01-01' }));
      const late = await patch(user.user_id, { ingestion_start: '2024-06-01' });
      assert.equal(late.statusCode, 422, late.body);
      assert.equal((await get(user.user_id)).ingestion_start, null, 'nothing changed');
      // Equal bounds are fine; then an end before the stored start is refused.
      assertNoContent(await patch(user.user_id, { ingestion_start: '2024-01-01' }));
      const early = await patch(user.user_id, { ingestion_end: '2023-12-31' });
      assert.equal(early.statusCode, 422, early.body);
      const stored = await get(user.user_id);
      assert.deepEqual([stored.ingestion_start, stored.ingestion_end], ['2024-01-01', '2024-01-01']);
      // Both in one body, in the wrong order.
      assert.equal((await patch(user.user_id, { ingestion_start: '2025-02-01', ingestion_end: '2025-01-31' })).statusCode, 422);
      // Clearing the end lets a later start through; so does moving both.
      assertNoContent(await patch(user.user_id, { ingestion_start: '2025-06-01', ingestion_end: null }));
      assertNoContent(await patch(user.user_id, { ingestion_start: '2026-01-01', ingestion_end: '2026-12-31' }));
      const moved = await get(user.user_id);
      assert.deepEqual([moved.ingestion_start, moved.ingestion_end], ['2026-01-01', '2026-12-31']);
    });

    it('judges the values before the uniqueness of client_user_id', async () => {
      const holder = await fresh();
      const user = await fresh();
      const res = await patch(user.user_id, { client_user_id: holder.client_user_id, fallback_time_zone: 'Foo/Bar' });
      assert.equal(res.statusCode, 422, res.body);
    });
  });

  describe('the same wording on create', () => {
    const create = (payload: unknown) => typeof payload === 'string'
      ? call('POST', '/v2/user/', payload, team.key, { 'content-type': 'application/json' })
      : call('POST', '/v2/user/', payload);

    it('a bad time zone', async () => {
      const res = await create({ client_user_id: unique('c'), fallback_time_zone: 'Foo/Bar' });
      assert.equal(res.statusCode, 422, res.body);
      assert.deepEqual(res.json(), { detail: [{
        type: 'value_error', loc: ['body', 'fallback_time_zone'], msg: 'Value error, Invalid IANA time zone: Foo/Bar', input: 'Foo/Bar',
      }] });
    });

    it('a value that is not a date, and a birth date in the future', async () => {
      for (const field of DATE_FIELDS) {
        const items = assertProblems(await create({ client_user_id: unique('c'), [field]: 'not-a-date' }), [{ type: 'date_from_datetime_parsing', loc: ['body', field] }], field);
        assert.equal(items[0]!.input, 'not-a-date');
      }
      assertProblems(await create({ client_user_id: unique('c'), fallback_birth_date: dayFromToday(3) }), [{ type: 'date_past', loc: ['body', 'fallback_birth_date'] }]);
    });

    it('the same items as PATCH for the same values', async () => {
      const user = await fresh();
      for (const body of [{ fallback_time_zone: 'Foo/Bar' }, { fallback_birth_date: 'x' }, { ingestion_start: '2024-02-30' }, { fallback_birth_date: dayFromToday(10) }]) {
        const created = await create({ client_user_id: unique('c'), ...body });
        const patched = await patch(user.user_id, body);
        assert.equal(created.statusCode, 422);
        assert.equal(patched.statusCode, 422);
        assert.deepEqual(patched.json(), created.json(), JSON.stringify(body));
      }
    });

    it('a body that is not a JSON object', async () => {
      for (const payload of ['[]', '"abc"', '42']) {
        const res = await create(payload);
        assert.deepEqual([res.statusCode, res.json().detail], [422, [{ ...NOT_AN_OBJECT, input: JSON.parse(payload) }]], payload);
      }
    });
  });

  describe('uniqueness', () => {
    it('answers 409 for a client_user_id another live user of the team holds, and changes nothing', async () => {
      const holder = await fresh();
      const user = await fresh({ fallback_time_zone: 'UTC' });
      const before = await get(user.user_id);
      for (const body of [{ client_user_id: holder.client_user_id }, { client_user_id: holder.client_user_id, fallback_time_zone: 'Europe/Rome' }]) {
        const res = await patch(user.user_id, body);
        assert.deepEqual([res.statusCode, res.json()], [409, { detail: 'Client user id already exists' }], JSON.stringify(body));
      }
      // An imported user's id is held too.
      const imported = await patch(user.user_id, { client_user_id: team.users[3]!.client_user_id });
      assert.deepEqual([imported.statusCode, imported.json()], [409, { detail: 'Client user id already exists' }]);
      assert.deepEqual(await get(user.user_id), before);
      assert.equal((await get(holder.user_id)).client_user_id, holder.client_user_id);
    });

    it("takes the user's own current value", async () => {
      const user = await fresh();
      assertNoContent(await patch(user.user_id, { client_user_id: user.client_user_id }));
      assertNoContent(await patch(user.user_id, { client_user_id: user.client_user_id, fallback_time_zone: 'Europe/Oslo' }));
      const after = await get(user.user_id);
      assert.equal(after.client_user_id, user.client_user_id);
      assert.equal(after.fallback_time_zone.id, 'Europe/Oslo');
    });

    it("takes a value held only in another team, or by a user scheduled for deletion", async () => {
      const user = await fresh();
      assertNoContent(await patch(user.user_id, { client_user_id: other.users[0]!.client_user_id }));
      const leaving = await fresh();
      assert.equal((await call('DELETE', `/v2/user/${leaving.user_id}`)).statusCode, 200);
      assertNoContent(await patch(user.user_id, { client_user_id: leaving.client_user_id }));
      assert.equal((await get(user.user_id)).client_user_id, leaving.client_user_id);
    });

    it('concurrent patches to one free client_user_id: exactly one wins', async () => {
      const users = await Promise.all(Array.from({ length: 5 }, () => fresh()));
      const wanted = unique('race');
      const answers = await Promise.all(users.map((u) => patch(u.user_id, { client_user_id: wanted })));
      assert.deepEqual(answers.map((r) => r.statusCode).sort(), [204, 409, 409, 409, 409], answers.map((r) => r.body).join('\n'));
      const holders = await sql`SELECT user_id FROM users WHERE team_id = ${team.teamId} AND client_user_id = ${wanted}`;
      assert.equal(holders.length, 1);
    });
  });

  describe('what is stored', () => {
    it('answers 204 with an empty body and stores each value as set by manual now', async () => {
      const user = await fresh();
      const before = Date.now();
      const res = await patch(user.user_id, {
        fallback_time_zone: 'America/Argentina/Buenos_Aires', fallback_birth_date: '1975-12-31', ingestion_start: '2024-01-01', ingestion_end: '2024-12-31',
      });
      assertNoContent(res);
      const u = await get(user.user_id);
      assert.deepEqual(u.fallback_time_zone, { id: 'America/Argentina/Buenos_Aires', source_slug: 'manual', updated_at: u.fallback_time_zone.updated_at });
      assert.deepEqual(u.fallback_birth_date, { value: '1975-12-31', source_slug: 'manual', updated_at: u.fallback_birth_date.updated_at });
      for (const t of [u.fallback_time_zone.updated_at, u.fallback_birth_date.updated_at]) {
        assert.match(t, DATE_TIME);
        assert.ok(Math.abs(Date.parse(t) - before) < 60_000, `updated_at ${t} is now`);
      }
      assert.deepEqual([u.ingestion_start, u.ingestion_end], ['2024-01-01', '2024-12-31']);
      // Everything else is as it was.
      assert.deepEqual({ ...u, fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null }, user);
      // The stored document is what the reference definition computes from the columns.
      assert.deepEqual(await documentDrifts(sql, { userIds: [user.user_id] }), [], 'users.doc is the document its columns make');
    });

    it('null clears a field; a field not sent is kept as it was', async () => {
      const user = await fresh({ fallback_time_zone: 'Europe/London', fallback_birth_date: '1980-03-13', ingestion_start: '2024-01-01', ingestion_end: '2024-06-30' });
      const stored = await get(user.user_id);
      assertNoContent(await patch(user.user_id, { fallback_time_zone: null }));
      let u = await get(user.user_id);
      assert.equal(u.fallback_time_zone, null);
      assert.deepEqual(u.fallback_birth_date, stored.fallback_birth_date, 'untouched, updated_at included');
      assert.deepEqual([u.ingestion_start, u.ingestion_end], ['2024-01-01', '2024-06-30']);
      assertNoContent(await patch(user.user_id, { fallback_birth_date: null, ingestion_start: null }));
      u = await get(user.user_id);
      assert.deepEqual([u.fallback_time_zone, u.fallback_birth_date, u.ingestion_start, u.ingestion_end], [null, null, null, '2024-06-30']);
      assertNoContent(await patch(user.user_id, { ingestion_end: null }));
      u = await get(user.user_id);
      assert.deepEqual({ ...u }, { ...stored, fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null });
      const [row] = await sql`
        SELECT fallback_time_zone, fallback_time_zone_source, fallback_time_zone_updated_at, fallback_birth_date, fallback_birth_date_source,
               fallback_birth_date_updated_at, ingestion_start, ingestion_end
        FROM users WHERE user_id = ${user.user_id}`;
      assert.deepEqual(Object.values(row!), Array(8).fill(null), 'the columns are cleared too');
    });

    it("replaces a value another source set, as set by manual now", async () => {
      const imported = team.users.find((u) => u.fallback_time_zone && u.fallback_time_zone.source_slug !== 'manual')!;
      const before = Date.now();
      assertNoContent(await patch(imported.user_id, { fallback_time_zone: 'Pacific/Auckland' }));
      const u = await get(imported.user_id);
      assert.equal(u.fallback_time_zone.id, 'Pacific/Auckland');
      assert.equal(u.fallback_time_zone.source_slug, 'manual');
      assert.ok(Math.abs(Date.parse(u.fallback_time_zone.updated_at) - before) < 60_000);
    });

    it('keeps the connected sources', async () => {
      const user = withSources();
      const before = await get(user.user_id);
      const providers = (await call('GET', `/v2/user/providers/${user.user_id}`)).body;
      const links = await sql`SELECT source_id, created_on FROM user_sources WHERE user_id = ${user.user_id} ORDER BY source_id`;
      assertNoContent(await patch(user.user_id, { fallback_birth_date: '1990-01-01', client_user_id: unique('kept') }));
      const after = await get(user.user_id);
      assert.deepEqual(after.connected_sources, before.connected_sources);
      assert.equal(after.connected_sources.length, user.connected_sources.length);
      assert.equal((await call('GET', `/v2/user/providers/${user.user_id}`)).body, providers);
      assert.deepEqual(await sql`SELECT source_id, created_on FROM user_sources WHERE user_id = ${user.user_id} ORDER BY source_id`, links);
      assert.deepEqual(await documentDrifts(sql, { userIds: [user.user_id] }), [], 'users.doc is the document its columns make');
    });

    it('ignores unknown body fields: a user_id, team_id or created_on in the body changes nothing', async () => {
      const user = await fresh();
      assertNoContent(await patch(user.user_id, {
        fallback_time_zone: 'UTC', user_id: randomUUID(), team_id: other.teamId, created_on: '2001-01-01T00:00:00+00:00', colour: 'blue',
      }));
      const u = await get(user.user_id);
      assert.deepEqual([u.user_id, u.team_id, u.created_on, u.fallback_time_zone.id], [user.user_id, team.teamId, user.created_on, 'UTC']);
      assert.equal(u.colour, undefined);
    });

    it('the list shows the change at once: a page read before is not served again', async () => {
      const page = async () => (await call('GET', '/v2/user/?offset=0&limit=500')).json();
      const target = team.users[5]!;
      const first = await page();
      await page(); // read twice: now it is certainly in the page cache
      const totalBefore = first.total;
      const ids = first.users.map((u: { user_id: string }) => u.user_id);
      assertNoContent(await patch(target.user_id, { fallback_time_zone: 'Asia/Kolkata', ingestion_start: '2020-02-02' }));
      const second = await page();
      const listed = second.users.find((u: { user_id: string }) => u.user_id === target.user_id);
      assert.deepEqual(listed, await get(target.user_id));
      assert.equal(listed.fallback_time_zone.id, 'Asia/Kolkata');
      assert.equal(listed.ingestion_start, '2020-02-02');
      assert.equal(second.total, totalBefore, 'a patch changes no count');
      assert.deepEqual(second.users.map((u: { user_id: string }) => u.user_id), ids, 'nor the order');
      // The same for a client_user_id: a smaller page too.
      const index = ids.indexOf(target.user_id);
      const small = `/v2/user/?offset=${index}&limit=1`;
      await call('GET', small);
      await call('GET', small);
      const renamed = unique('listed');
      assertNoContent(await patch(target.user_id, { client_user_id: renamed }));
      assert.equal((await call('GET', small)).json().users[0].client_user_id, renamed);
    });

    it('resolve follows a new client_user_id at once; the old one is not found', async () => {
      const user = await fresh();
      const old = user.client_user_id as string;
      assert.equal((await call('GET', `/v2/user/resolve/${encodeURIComponent(old)}`)).statusCode, 200);
      const renamed = unique('renamed');
      assertNoContent(await patch(user.user_id, { client_user_id: renamed }));
      const found = await call('GET', `/v2/user/resolve/${encodeURIComponent(renamed)}`);
      assert.equal(found.statusCode, 200, found.body);
      assert.deepEqual(found.json(), await get(user.user_id));
      assert.equal(found.json().client_user_id, renamed);
      const lost = await call('GET', `/v2/user/resolve/${encodeURIComponent(old)}`);
      assert.deepEqual([lost.statusCode, lost.json()], [404, { detail: 'User not found' }]);
      // The old value is free: a new user may take it.
      const taken = await call('POST', '/v2/user/', { client_user_id: old });
      assert.equal(taken.statusCode, 200, taken.body);
    });

    it('a patched user, deleted and restored, comes back with its patched values', async () => {
      const user = await fresh();
      assertNoContent(await patch(user.user_id, { fallback_time_zone: 'Europe/Madrid', ingestion_end: '2030-01-01' }));
      const patched = await get(user.user_id);
      assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${user.user_id}`)).statusCode, 200);
      assert.deepEqual(await get(user.user_id), patched);
    });
  });
});

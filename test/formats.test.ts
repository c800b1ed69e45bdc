/**
 * Value formats of the User object (contract section 3): date-times in UTC
 * with "+00:00" and the stored fractional seconds, dates as YYYY-MM-DD,
 * nulls for what is unset, every key present and nothing else.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import { asApiUser, lines, teamWithKey, teamWithUsers, testApp, testSql, type TestTeam } from './helpers.js';

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const USER_KEYS = ['client_user_id', 'connected_sources', 'created_on', 'fallback_birth_date', 'fallback_time_zone',
  'ingestion_end', 'ingestion_start', 'team_id', 'user_id'];

const keys = (o: object) => Object.keys(o).sort();

/** Checks the shape and formats of a User object as the API returned it. */
function assertUserShape(u: Record<string, any>): void {
  assert.deepEqual(keys(u), USER_KEYS, 'every key present, nothing else');
  assert.match(u.created_on, DATE_TIME);
  for (const cs of u.connected_sources) {
    assert.deepEqual(keys(cs), ['created_on', 'provider', 'source']);
    assert.match(cs.created_on, DATE_TIME);
    assert.deepEqual(keys(cs.source), ['logo', 'name', 'slug']);
    assert.deepEqual(cs.provider, cs.source, 'provider is a copy of source');
  }
  const times = u.connected_sources.map((cs: any) => [Date.parse(cs.created_on), cs.source.slug]);
  const ordered = [...times].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  assert.deepEqual(times, ordered, 'connected_sources ordered by created_on, then slug');
  if (u.fallback_time_zone !== null) {
    assert.deepEqual(keys(u.fallback_time_zone), ['id', 'source_slug', 'updated_at']);
    assert.match(u.fallback_time_zone.updated_at, DATE_TIME);
  }
  if (u.fallback_birth_date !== null) {
    assert.deepEqual(keys(u.fallback_birth_date), ['source_slug', 'updated_at', 'value']);
    assert.match(u.fallback_birth_date.value, DATE);
    assert.match(u.fallback_birth_date.updated_at, DATE_TIME);
  }
  for (const k of ['ingestion_start', 'ingestion_end']) if (u[k] !== null) assert.match(u[k], DATE);
}

describe('User object formats', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  // Sources of this file's own, so that their names and logos never touch other files' users.
  const tag = randomUUID().slice(0, 8);
  const src = (letter: string) => ({ name: `Format ${letter.toUpperCase()}`, slug: `fmt_${letter}_${tag}`, logo: `https://example.com/fmt_${letter}.png` });
  const [a, b, c] = [src('a'), src('b'), src('c')];
  // What each imported line should read back as, exactly (before `provider` is added).
  const cases: { input: Record<string, any>; output: Record<string, any> }[] = [];

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithKey(sql, 'formats');
    const base = (n: string) => ({ user_id: randomUUID(), team_id: team.teamId, client_user_id: `fmt-${n}` });
    const micro = {
      ...base('micro'),
      created_on: '2021-03-04T05:06:07.123456+00:00',
      connected_sources: [
        { created_on: '2021-03-06T00:00:00.000001+00:00', source: a },
        { created_on: '2021-03-05T10:00:00.5+00:00', source: c },
        // Same instant as c's, written with trailing zeros: the slug decides.
        { created_on: '2021-03-05T10:00:00.500000+00:00', source: b },
      ],
      fallback_time_zone: { id: 'Europe/London', source_slug: 'oura', updated_at: '2022-09-11T13:45:56.000001+00:00' },
      fallback_birth_date: { value: '1980-03-13', source_slug: 'manual', updated_at: '2022-09-11T13:45:56+00:00' },
      ingestion_start: '2024-01-01',
      ingestion_end: '2024-12-31',
    };
    cases.push({
      input: micro,
      output: {
        ...micro,
        connected_sources: [
          { created_on: '2021-03-05T10:00:00.5+00:00', source: b },
          { created_on: '2021-03-05T10:00:00.5+00:00', source: c },
          { created_on: '2021-03-06T00:00:00.000001+00:00', source: a },
        ],
      },
    });
    const whole = {
      ...base('whole'), created_on: '2020-01-01T00:00:00+00:00', connected_sources: [],
      fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
    };
    cases.push({ input: whole, output: whole });
    // Other offsets are accepted and written back in UTC; optional keys left out read back as null.
    const offset = { ...base('offset'), created_on: '2021-06-01T12:00:00.654321+05:30', connected_sources: [{ created_on: '2021-06-02T00:00:00Z', source: a }], fallback_time_zone: { id: 'UTC', source_slug: 'manual', updated_at: '2021-06-01T23:30:00.1-01:00' } };
    cases.push({
      input: offset,
      output: {
        ...offset, created_on: '2021-06-01T06:30:00.654321+00:00',
        connected_sources: [{ created_on: '2021-06-02T00:00:00+00:00', source: a }],
        fallback_time_zone: { id: 'UTC', source_slug: 'manual', updated_at: '2021-06-02T00:30:00.1+00:00' },
        fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
      },
    });
    await importUsers(sql, lines(cases.map((x) => x.input)));
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const get = (url: string, key = team.key) => app.inject({ url, headers: { 'x-service-api-key': key } });

  it('reads imported users back exactly: microseconds kept, none added, UTC with +00:00, sources in order', async () => {
    for (const { output } of cases) {
      const expected = asApiUser(output);
      const byId = await get(`/v2/user/${output.user_id}`);
      assert.equal(byId.statusCode, 200, byId.body);
      assert.deepEqual(byId.json(), expected);
      assertUserShape(byId.json());
      const resolved = await get(`/v2/user/resolve/${output.client_user_id}`);
      assert.deepEqual(resolved.json(), expected);
    }
  });

  it('lists the same objects', async () => {
    const page = (await get('/v2/user/')).json();
    const listed = new Map(page.users.map((u: any) => [u.user_id, u]));
    for (const { output } of cases) assert.deepEqual(listed.get(output.user_id), asApiUser(output));
    // List order is by instant, whatever the precision written.
    assert.deepEqual(page.users.map((u: any) => u.client_user_id).slice(0, 3), ['fmt-whole', 'fmt-micro', 'fmt-offset']);
  });

  it('gives every generated user the contract shape', async () => {
    const generated = await teamWithUsers(sql, 150);
    const page = (await get('/v2/user/?limit=500', generated.key)).json();
    assert.equal(page.users.length, 150);
    for (const u of page.users) assertUserShape(u);
    assert.ok(page.users.some((u: any) => u.connected_sources.length > 1), 'some users have several sources');
    assert.ok(page.users.some((u: any) => u.fallback_birth_date === null), 'some users have no birth date');
  });

  it('writes a created user in the same formats, with nulls for what was not given', async () => {
    const bare = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: `fmt-created-${tag}` } });
    assert.equal(bare.statusCode, 200, bare.body);
    const u = (await get(`/v2/user/${bare.json().user_id}`)).json();
    assertUserShape(u);
    assert.deepEqual(
      { ...u, created_on: null },
      { user_id: bare.json().user_id, team_id: team.teamId, client_user_id: `fmt-created-${tag}`, created_on: null, connected_sources: [], fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null },
    );

    const full = await app.inject({
      method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key },
      payload: { client_user_id: `fmt-full-${tag}`, fallback_time_zone: 'America/New_York', fallback_birth_date: '2000-02-29', ingestion_start: '2024-01-01', ingestion_end: '2024-01-31' },
    });
    assert.equal(full.statusCode, 200, full.body);
    const f = (await get(`/v2/user/${full.json().user_id}`)).json();
    assertUserShape(f);
    assert.deepEqual(f.fallback_time_zone, { id: 'America/New_York', source_slug: 'manual', updated_at: f.fallback_time_zone.updated_at });
    assert.deepEqual(f.fallback_birth_date, { value: '2000-02-29', source_slug: 'manual', updated_at: f.fallback_birth_date.updated_at });
    assert.equal(f.ingestion_start, '2024-01-01');
    assert.equal(f.ingestion_end, '2024-01-31');
  });
});

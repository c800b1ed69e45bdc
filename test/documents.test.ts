import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import { parsePgTime } from '../src/user-document/pg-time.js';
import { documentDrifts } from '../src/writes/stored-documents.js';
import { appWithTeam, generateUsers, lines, teamWithKey, type TestTeam } from './helpers.js';

/** The text PostgreSQL stores for an RFC 3339 date-time, or null where the import refuses it. */
const pgTimestamp = (value: string) => parsePgTime(value)?.text ?? null;

/** Users whose stored document differs from the one their stored columns and connections make. */
const mismatches = (sql: Sql, teamId: string) => documentDrifts(sql, { teamIds: [teamId] });

describe('stored user documents (users.doc) are the ones their columns and connections make', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  // A source of this test's own: renaming it must not touch other test files' users.
  const slug = `doc_test_${randomUUID().slice(0, 8)}`;
  const source = { name: 'Doc "Test" \\ Source', slug, logo: `https://example.com/${slug}.png` };

  appWithTeam((fixture) => ({ sql, app, team } = fixture));

  it('after an import of generated users and awkward values', async () => {
    const users: Record<string, any>[] = generateUsers(300).map((u) => ({ ...u, team_id: team.teamId }));
    users[0] = {
      ...users[0], client_user_id: 'quote " backslash \\ tab-free unicode ☃ é',
      created_on: '2021-03-04T05:06:07.123456+02:00',
      connected_sources: [
        { created_on: '2021-03-05T00:00:00Z', source },
        { created_on: '2021-03-05T00:00:00.000000+00:00', source: { name: 'Oura', slug: 'oura', logo: 'https://storage.example.com/providers/oura.png' } },
      ],
      fallback_time_zone: { id: 'UTC', source_slug: 'manual', updated_at: '2021-03-04T23:59:59.9-05:30' },
    };
    await importUsers(sql, lines(users));
    assert.deepEqual(await mismatches(sql, team.teamId), []);
  });

  it('after a create through the API', async () => {
    const res = await app.inject({
      method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key },
      payload: { client_user_id: 'created-doc', fallback_time_zone: 'Europe/London', fallback_birth_date: '1990-01-31', ingestion_start: '2024-01-01' },
    });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(await mismatches(sql, team.teamId), []);
  });

  it("after an import that changes a source's name and logo, for users not in that import", async () => {
    const other = await teamWithKey(sql);
    const [user] = generateUsers(1).map((u) => ({ ...u, team_id: other.teamId, connected_sources: [{ created_on: '2024-01-01T00:00:00+00:00', source: { ...source, name: 'Renamed', logo: 'https://example.com/new.png' } }] }));
    await importUsers(sql, lines([user!]));
    assert.deepEqual(await mismatches(sql, team.teamId), []);
    const [stored] = await sql<{ doc: string }[]>`
      SELECT doc FROM users WHERE team_id = ${team.teamId} AND doc LIKE '%Renamed%'`;
    assert.ok(stored, "the first team's user with that source shows the new name");
  });

  it('writes date-times exactly as PostgreSQL does', async () => {
    const samples = ['2021-03-04T05:06:07.123456+02:00', '2021-03-04T05:06:07Z', '2021-03-04T05:06:07.100+00:00',
      '1999-12-31T23:30:00-01:00', '2024-02-29T12:00:00.000001+00:00', '2021-03-04T05:06:07.5+14:00',
      '2021-03-04T05:06:07.120-00:00', '2021-03-04T05:06:07.000000z', '1000-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z',
      '1000-01-01T00:30:00+00:30', '2020-12-31T23:59:59.5-10:00'];
    for (const s of samples) {
      const [row] = await sql<{ t: string }[]>`SELECT to_json(${s}::text::timestamptz) #>> '{}' AS t`;
      assert.equal(pgTimestamp(s), row!.t, s);
    }
    assert.equal(pgTimestamp('2021-03-04T05:06:07.1234567+00:00'), null, 'more than microseconds is refused, not rounded');
    for (const outside of ['0999-12-31T23:59:59Z', '0999-12-31T23:59:59+00:00', '1000-01-01T00:00:00+00:01', '2021-03-04T05:06:60Z',
      '2021-02-29T00:00:00Z', '2021-04-31T00:00:00+02:00', '2021-03-04T24:00:00Z', '2021-03-04T05:60:00Z', '2021-13-01T00:00:00Z',
      // Years below 100 with an offset: JavaScript's Date.UTC reads them as 1900-1999.
      '0050-06-01T00:00:00+01:00', '0000-01-01T00:00:00-01:00']) {
      assert.equal(pgTimestamp(outside), null, outside);
    }
  });
});

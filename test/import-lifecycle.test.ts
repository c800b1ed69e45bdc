/**
 * `hds import` and `hds export` meet the user lifecycle (contract section 8,
 * migrations/005): a user scheduled for deletion cannot be imported over,
 * exports leave out users scheduled for deletion or purged, and both ways of
 * importing keep the teams' counts (users, positions, holes, connections by
 * week) equal to a count from scratch, which GET /v2/user/metrics answers.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers, type ImportMethod } from '../src/import/import.js';
import { exportUsers } from '../src/import/export.js';
import { purgeDeletedUsers } from '../src/users/deletion.js';
import { createUser } from '../src/users/create.js';
import { recountTeams } from '../src/users/recount.js';
import { callAs, generateUsers, lines, rejectsAt, teamWithKey, teamWithUsers, testApp, testSql, type TestTeam } from './helpers.js';

const DAY = 86_400_000;
const WEEK = 7 * DAY;
const iso = (ms: number) => new Date(ms).toISOString().replace('Z', '+00:00');
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
function mondayOf(at: number): number {
  const d = new Date(at);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - ((d.getUTCDay() + 6) % 7) * DAY;
}

const source = (slug: string, name: string) => ({ name, slug, logo: `https://storage.example.com/providers/${slug}.png` });
const SOURCES = [source('oura', 'Oura'), source('fitbit', 'Fitbit'), source('garmin', 'Garmin'), source('polar', 'Polar')];

/** An import record of `teamId` created at `createdOn`, connected at `times` (ISO strings, written as given). */
function record(teamId: string, createdOn: string, times: string[] = []): Record<string, any> {
  return {
    user_id: randomUUID(), team_id: teamId, client_user_id: `il-${randomUUID()}`, created_on: createdOn,
    connected_sources: times.map((t, i) => ({ created_on: t, source: SOURCES[i]! })),
    fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
  };
}

describe('import and the user lifecycle', () => {
  let sql: Sql;
  let app: App;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string) =>
    callAs(app, key, method, url);
  const usersExisting = async (ids: string[]) =>
    (await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE user_id = ANY(${ids}::uuid[])`).map((r) => r.user_id);
  const teamsExisting = async (ids: string[]) =>
    (await sql<{ team_id: string }[]>`SELECT team_id FROM teams WHERE team_id = ANY(${ids}::uuid[])`).map((r) => r.team_id);
  const teamRow = async (teamId: string) =>
    (await sql`SELECT user_count, next_position, connected_sources, version FROM teams WHERE team_id = ${teamId}`)[0];

  /** The team's kept counts equal the counts from scratch, and the metrics and the list answer them. */
  async function assertCountsRight(team: TestTeam, what: string): Promise<void> {
    assert.deepEqual((await recountTeams(sql, [team.teamId])).drifts, [], `${what}: kept state of team ${team.teamId}`);
    const [counted] = await sql<{ user_count: number; connected_sources: number }[]>`
      SELECT (SELECT count(*) FROM users WHERE team_id = ${team.teamId})::int AS user_count,
        (SELECT count(*) FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${team.teamId})::int AS connected_sources`;

    const before = mondayOf(Date.now());
    const res = await call('GET', '/v2/user/metrics', team.key);
    assert.equal(res.statusCode, 200, res.body);
    const m = res.json();
    assert.equal(m.team_id, team.teamId);
    assert.equal(m.number_of_users, counted!.user_count, `${what}: number_of_users`);
    assert.equal(m.number_of_connected_sources, counted!.connected_sources, `${what}: number_of_connected_sources`);
    const times = (await sql<{ t: Date }[]>`
      SELECT us.created_on AS t FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${team.teamId}`).map((r) => r.t.getTime());
    const last = Date.parse(`${m.number_of_connected_sources_by_week.at(-1).date}T00:00:00Z`);
    assert.ok(last === before || last === mondayOf(Date.now()), `${what}: this week last`);
    const expected = Array.from({ length: 12 }, (_, i) => {
      const start = last - (11 - i) * WEEK;
      return { date: day(start), value: times.filter((t) => t >= start && t < start + WEEK).length, all: times.filter((t) => t < start + WEEK).length };
    });
    assert.deepEqual(m.number_of_connected_sources_by_week, expected, `${what}: weekly series`);

    // Paged through the API, the list is the team's users in (created_on, user_id) order, total included.
    const stored = (await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${team.teamId} ORDER BY created_on, user_id`).map((r) => r.user_id);
    const listed: string[] = [];
    for (let offset = 0; ; offset += 500) {
      const page = await call('GET', `/v2/user/?offset=${offset}&limit=500`, team.key);
      assert.equal(page.statusCode, 200, page.body);
      assert.equal(page.json().total, stored.length, `${what}: total`);
      const ids = page.json().users.map((u: { user_id: string }) => u.user_id);
      listed.push(...ids);
      if (ids.length < 500) break;
    }
    assert.deepEqual(listed, stored, `${what}: the list, paged`);
  }

  describe('a line whose user_id is scheduled for deletion', () => {
    for (const method of ['auto', 'merge', 'bulk'] as ImportMethod[]) {
      it(`is refused naming its line, and nothing is written (${method})`, async () => {
        const team = await teamWithUsers(sql, 12);
        const victim = team.users[4]!;
        const newTeam = randomUUID();
        const file = [
          record(team.teamId, iso(Date.now() - 1000)),
          record(newTeam, '2024-01-01T00:00:00+00:00'),
          { ...victim, fallback_time_zone: { id: 'UTC', source_slug: 'import', updated_at: '2024-01-01T00:00:00+00:00' } },
          record(team.teamId, '2023-05-05T00:00:00+00:00'),
        ];
        const teamBefore = await teamRow(team.teamId);
        assert.equal((await call('DELETE', `/v2/user/${victim.user_id}`, team.key)).statusCode, 200);
        const deletedRow = await teamRow(team.teamId);
        await rejectsAt(importUsers(sql, lines(file), undefined, { method }), 3, /scheduled for deletion/);

        assert.deepEqual(await usersExisting(file.map((r) => r.user_id)), [], 'no user of the file exists');
        assert.deepEqual(await teamsExisting([newTeam]), [], 'the new team was not created');
        assert.deepEqual(await teamRow(team.teamId), deletedRow, "the team's counts are as the delete left them");
        assert.notDeepEqual(teamBefore, deletedRow);
        const [kept] = await sql`SELECT 1 FROM deleted_users WHERE user_id = ${victim.user_id}`;
        assert.ok(kept, 'still scheduled for deletion');
        // Still restorable, as it was (without its connections).
        assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${victim.user_id}`, team.key)).statusCode, 200);
        assert.equal((await call('GET', `/v2/user/${victim.user_id}`, team.key)).json().client_user_id, victim.client_user_id);
      });
    }

    for (const method of ['merge', 'bulk'] as ImportMethod[]) {
      it(`is refused also when the line puts it in a new team (${method})`, async () => {
        // Repro of the bulk case: DELETE a user, then `hds import --method bulk` a file for a team with no users whose
        // lines include that user_id (any team_id): the bulk path does not look at deleted_users.
        const team = await teamWithUsers(sql, 6);
        const victim = team.users[2]!;
        assert.equal((await call('DELETE', `/v2/user/${victim.user_id}`, team.key)).statusCode, 200);
        const fresh = await teamWithKey(sql, 'il fresh');
        const file = [
          record(fresh.teamId, '2024-01-01T00:00:00+00:00'),
          { ...victim, team_id: fresh.teamId },
          record(fresh.teamId, '2024-02-01T00:00:00+00:00'),
        ];
        await rejectsAt(importUsers(sql, lines(file), undefined, { method }), 2, /scheduled for deletion/);
        assert.deepEqual(await usersExisting(file.map((r) => r.user_id)), [], 'no user of the file exists');
        const [row] = await sql<{ n: number }[]>`SELECT user_count::int AS n FROM teams WHERE team_id = ${fresh.teamId}`;
        assert.equal(row!.n, 0);
        // The scheduled user is still restorable.
        const undo = await call('POST', `/v2/user/undo_delete?user_id=${victim.user_id}`, team.key);
        assert.equal(undo.statusCode, 200, undo.body);
      });
    }
  });

  describe('export', () => {
    it('leaves out users scheduled for deletion and purged users, in list order, as GET answers the rest', async () => {
      const team = await teamWithUsers(sql, 15);
      const scheduled = team.users[3]!;
      const purged = team.users[8]!;
      for (const u of [scheduled, purged]) assert.equal((await call('DELETE', `/v2/user/${u.user_id}`, team.key)).statusCode, 200);
      // Purged as after the grace period: only this user is made old enough for the purge below, in a transaction
      // of its own so that no other test's purge ever sees it aged.
      const gone: string[] = [];
      await sql.begin(async (tx) => {
        await tx`UPDATE deleted_users SET deleted_at = '1990-01-01T00:00:00Z' WHERE user_id = ${purged.user_id}`;
        await purgeDeletedUsers(tx as unknown as Sql, 20 * 365 * DAY, (users) => gone.push(...users.map((u) => u.user_id)));
      });
      assert.ok(gone.includes(purged.user_id));
      assert.ok(!gone.includes(scheduled.user_id));

      let text = '';
      for await (const chunk of exportUsers(sql, team.teamId)) text += chunk;
      const exported = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);
      const ids = exported.map((u) => u.user_id);
      assert.ok(!ids.includes(scheduled.user_id), 'a user scheduled for deletion is not exported');
      assert.ok(!ids.includes(purged.user_id), 'a purged user is not exported');
      const list = (await call('GET', '/v2/user/?limit=500', team.key)).json();
      assert.deepEqual(ids, list.users.map((u: { user_id: string }) => u.user_id), 'the list, in its order');
      assert.equal(exported.length, 13);
      for (const [i, u] of exported.entries()) {
        const api = list.users[i];
        assert.deepEqual(u, { ...api, connected_sources: api.connected_sources.map(({ provider: _p, ...cs }: Record<string, unknown>) => cs) });
      }
      // After an undo the user is exported again.
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${scheduled.user_id}`, team.key)).statusCode, 200);
      let again = '';
      for await (const chunk of exportUsers(sql, team.teamId)) again += chunk;
      assert.ok(again.includes(scheduled.user_id));
      assert.ok(!again.includes(purged.user_id));
    });
  });

  describe('kept counts after imports', () => {
    let teams: TestTeam[];
    let records: Record<string, any>[];
    const M0 = mondayOf(Date.now());
    const midweek = (weeksAgo: number) => iso(M0 - weeksAgo * WEEK + 2 * DAY + 9 * 3600_000);

    it('a bulk import into fresh teams: counts, positions, holes, connections by week, metrics', async () => {
      teams = [await teamWithKey(sql, 'il bulk 1'), await teamWithKey(sql, 'il bulk 2')];
      const generated = generateUsers(3000, 2);
      const generatedTeams = [...new Set(generated.map((u) => u.team_id as string))];
      records = generated.map((u) => ({ ...u, team_id: teams[generatedTeams.indexOf(u.team_id) % 2]!.teamId }));
      // Connections in the metrics' window, and at week boundaries in other offsets (the bulk path counts weeks
      // itself, from the file): Monday 00:30 at +01:00 is the Sunday before; Sunday 23:00 at -03:00 the Monday after;
      // and dates before 2000 and 1970, and in the future.
      const lastMonday = day(M0 - WEEK);
      const sunday = day(M0 - 2 * WEEK - DAY);
      for (const [i, team] of teams.entries()) {
        records.push(
          record(team.teamId, '2024-06-01T00:00:00+00:00', [midweek(0), midweek(1), midweek(2 + i)]),
          record(team.teamId, '2024-06-02T00:00:00+00:00', [`${lastMonday}T00:30:00+01:00`, `${sunday}T23:00:00.5-03:00`, midweek(11)]),
          record(team.teamId, '2024-06-03T00:00:00+00:00', ['1999-12-31T23:30:00-01:00', '1969-12-29T00:00:00+00:00', '1000-01-06T12:00:00+00:00']),
          record(team.teamId, '2024-06-04T00:00:00+00:00', [midweek(-2), midweek(12), '2000-01-02T23:59:59.999999+00:00']),
        );
      }
      const summary = await importUsers(sql, lines(records), undefined, { method: 'bulk' });
      assert.equal(summary.method, 'bulk', summary.bulkSkipped);
      assert.equal(summary.inserted, records.length);
      for (const team of teams) await assertCountsRight(team, 'a bulk import');
    });

    it('a bulk import into a team whose users were all deleted and purged: their positions are held again', async () => {
      const team = await teamWithUsers(sql, 300);
      for (const u of team.users) assert.equal((await call('DELETE', `/v2/user/${u.user_id}`, team.key)).statusCode, 200);
      const ids = team.users.map((u) => u.user_id);
      // Aged and purged in a transaction of its own, so that no other test's purge ever sees these aged.
      await sql.begin(async (tx) => {
        await tx`UPDATE deleted_users SET deleted_at = '1990-01-01T00:00:00Z' WHERE user_id = ANY(${ids}::uuid[])`;
        await purgeDeletedUsers(tx as unknown as Sql, 20 * 365 * DAY);
      });
      assert.equal((await sql`SELECT user_id FROM deleted_users WHERE team_id = ${team.teamId}`).length, 0, 'all purged');
      const file = generateUsers(600, 1).map((u) => ({ ...u, team_id: team.teamId }));
      const summary = await importUsers(sql, lines(file), undefined, { method: 'bulk' });
      assert.equal(summary.method, 'bulk', summary.bulkSkipped);
      await assertCountsRight(team, 'a bulk import after a purge of every user');
    });

    it('a merge import that appends users and changes connections', async () => {
      const [team] = teams;
      const mine = records.filter((r) => r.team_id === team!.teamId && r.connected_sources.length >= 2);
      const changed = mine.slice(0, 3).map((r, i) => ({
        ...r,
        connected_sources: i === 0 ? [] // every connection removed
          : i === 1 ? [{ ...r.connected_sources[0], created_on: midweek(4) }] // one moved into the window, the rest removed
          : [...r.connected_sources, { created_on: midweek(0), source: source('ultrahuman', 'Ultrahuman') }], // one added
      }));
      const appended = Array.from({ length: 300 }, (_, i) => record(team!.teamId, iso(Date.now() - 3600_000 + i), i % 3 === 0 ? [midweek(i % 12)] : []));
      const summary = await importUsers(sql, lines([...changed, ...appended]), undefined, { method: 'merge' });
      assert.equal(summary.method, 'merge');
      assert.deepEqual([summary.inserted, summary.updated], [300, 3]);
      await assertCountsRight(team!, 'a merge that appends');
    });

    it('deletes, then a merge import of users that sort before stored ones (the team renumbered)', async () => {
      const [team] = teams;
      const stored = await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${team!.teamId} ORDER BY position`;
      // The first, a few in the middle (with connections, some), and the last.
      const at = (share: number) => stored[Math.floor(stored.length * share)]!;
      const victims = [stored[0]!, at(0.3), stored[stored.indexOf(at(0.3)) + 1]!, at(0.7), stored.at(-1)!].map((r) => r.user_id);
      for (const id of victims) assert.equal((await call('DELETE', `/v2/user/${id}`, team!.key)).statusCode, 200);
      await assertCountsRight(team!, 'deletes');
      const early = Array.from({ length: 50 }, (_, i) => record(team!.teamId, iso(Date.parse('2023-03-01T00:00:00Z') + i * 7 * DAY), [midweek(i % 14)]));
      const summary = await importUsers(sql, lines(early), undefined, { method: 'merge' });
      assert.deepEqual([summary.method, summary.inserted], ['merge', 50]);
      await assertCountsRight(team!, 'a merge that renumbers');
      // An undo after the renumbering puts the user back at its place.
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${victims[2]}`, team!.key)).statusCode, 200);
      await assertCountsRight(team!, 'an undo after a renumbering');
    });

    it('an auto import of 10,000 users into fresh teams (bulk when the table is not larger than the file)', async () => {
      const fresh = [await teamWithKey(sql, 'il auto 1'), await teamWithKey(sql, 'il auto 2')];
      const generated = generateUsers(10_000, 2);
      const generatedTeams = [...new Set(generated.map((u) => u.team_id as string))];
      const file: Record<string, any>[] = generated.map((u) => ({ ...u, team_id: fresh[generatedTeams.indexOf(u.team_id) % 2]!.teamId }));
      for (const [i, team] of fresh.entries()) file.push(record(team.teamId, '2024-07-01T00:00:00+00:00', [midweek(i), midweek(5), midweek(-1)]));
      const summary = await importUsers(sql, lines(file));
      assert.equal(summary.inserted, file.length);
      // Which way auto took depends on how many users other test files have stored; the counts must be right either way.
      for (const team of fresh) await assertCountsRight(team, `an auto import (${summary.method})`);
    });

    it('a user imported from the future, then creates through the API (each renumbering the team)', async () => {
      const team = await teamWithKey(sql, 'il future');
      const file = [
        ...Array.from({ length: 5 }, (_, i) => record(team.teamId, iso(Date.parse('2024-01-01T00:00:00Z') + i * DAY), [midweek(i)])),
        record(team.teamId, '2030-01-01T00:00:00+00:00', [midweek(-1)]),
      ];
      await importUsers(sql, lines(file));
      await assertCountsRight(team, 'an import with a user from the future');
      const create = async () => {
        const res = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: `il-${randomUUID()}` } });
        assert.equal(res.statusCode, 200, res.body);
        return res.json().user_id as string;
      };
      const created = [await create(), await create(), await create()];
      await assertCountsRight(team, 'creates before a user from the future');
      // Together, the last two go as one batch, which would not sort last: each is then created alone.
      const together = await Promise.all([0, 1, 2].map(() => createUser(sql, team.teamId, { client_user_id: `il-${randomUUID()}` })));
      assert.deepEqual(together.map((r) => r.created), [true, true, true]);
      await assertCountsRight(team, 'concurrent creates before a user from the future');
      // Deleted, the user from the future still holds its place: creates keep sorting before it.
      assert.equal((await call('DELETE', `/v2/user/${file.at(-1)!.user_id}`, team.key)).statusCode, 200);
      assert.equal((await call('DELETE', `/v2/user/${created[1]}`, team.key)).statusCode, 200);
      await create();
      await assertCountsRight(team, 'deletes and a create');
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${file.at(-1)!.user_id}`, team.key)).statusCode, 200);
      await assertCountsRight(team, 'the user from the future restored');
    });

    it('a merge that appends after the last user was deleted, and an auto import', async () => {
      const [, team] = teams;
      const [last] = await sql<{ user_id: string }[]>`SELECT user_id FROM users WHERE team_id = ${team!.teamId} ORDER BY position DESC LIMIT 1`;
      assert.equal((await call('DELETE', `/v2/user/${last!.user_id}`, team!.key)).statusCode, 200);
      const appended = Array.from({ length: 20 }, (_, i) => record(team!.teamId, iso(Date.now() - 60_000 + i), [midweek(1)]));
      await importUsers(sql, lines(appended), undefined, { method: 'merge' });
      await assertCountsRight(team!, 'a merge after the last user was deleted');
      const more = Array.from({ length: 10 }, (_, i) => record(team!.teamId, iso(Date.now() - 30_000 + i), [midweek(0)]));
      const summary = await importUsers(sql, lines(more));
      assert.equal(summary.method, 'merge');
      await assertCountsRight(team!, 'an auto import');
    });
  });
});

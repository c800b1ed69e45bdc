/** GET /v2/user/metrics: contract section 8; the counts it reads are kept with every write (migrations/005). */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, mock } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { documentDrifts } from '../src/writes/stored-documents.js';
import { importUsers } from '../src/import/import.js';
import { recountTeams } from '../src/users/recount.js';
import { callAs, lines, teamWithKey, twoTeams, type TestTeam } from './helpers.js';

const DAY = 86_400_000;
const WEEK = 7 * DAY;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The Monday (UTC, 00:00) of the week `at` falls in, in ms. */
function mondayOf(at: number): number {
  const d = new Date(at);
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return midnight - ((d.getUTCDay() + 6) % 7) * DAY;
}
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const iso = (ms: number) => new Date(ms).toISOString().replace('Z', '+00:00');

const SOURCES = ['oura', 'fitbit', 'garmin', 'withings', 'polar', 'strava'].map((slug) => ({
  name: { oura: 'Oura', fitbit: 'Fitbit', garmin: 'Garmin', withings: 'Withings', polar: 'Polar', strava: 'Strava' }[slug]!,
  slug, logo: `https://storage.example.com/providers/${slug}.png`,
}));

/** An import record of `teamId` whose connections were made at `times` (written as given: ISO strings, any offset). */
function record(teamId: string, times: string[], createdOn = iso(Date.now() - 400 * DAY)): Record<string, any> {
  return {
    user_id: randomUUID(), team_id: teamId, client_user_id: `tm-${randomUUID()}`, created_on: createdOn,
    connected_sources: times.map((t, i) => ({ created_on: t, source: SOURCES[i]! })),
    fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
  };
}

interface Week { date: string; value: number; all: number }

/** The series the contract asks for, from the connection times of the team's live users: the 12 weeks ending with `lastMonday`. */
function seriesOf(times: number[], lastMonday: number): Week[] {
  return Array.from({ length: 12 }, (_, i) => {
    const start = lastMonday - (11 - i) * WEEK;
    return {
      date: day(start),
      value: times.filter((t) => t >= start && t < start + WEEK).length,
      all: times.filter((t) => t < start + WEEK).length,
    };
  });
}

describe('GET /v2/user/metrics', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  let other: TestTeam;

  twoTeams('metrics', (f) => ({ sql, app, team, other } = f));

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key = team.key, payload?: object) =>
    callAs(app, key, method, url, payload);
  /** The metrics answer, checked for shape; and the current Monday as the request saw it. */
  const metrics = async (key = team.key) => {
    const before = mondayOf(Date.now());
    const res = await call('GET', '/v2/user/metrics', key);
    const after = mondayOf(Date.now());
    assert.equal(res.statusCode, 200, res.body);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), [
      'number_of_connected_sources', 'number_of_connected_sources_by_week', 'number_of_errored_connected_sources',
      'number_of_ordered_tests', 'number_of_users', 'team_id',
    ]);
    assert.equal(body.number_of_errored_connected_sources, 0);
    assert.equal(body.number_of_ordered_tests, 0);
    const weeks = body.number_of_connected_sources_by_week as Week[];
    assert.equal(weeks.length, 12);
    const last = Date.parse(`${weeks.at(-1)!.date}T00:00:00Z`);
    assert.ok(last === before || last === after, `the current week last: ${weeks.at(-1)!.date}, expected ${day(before)}`);
    weeks.forEach((w, i) => {
      assert.deepEqual(Object.keys(w), ['date', 'value', 'all']);
      assert.match(w.date, DATE);
      assert.equal(new Date(`${w.date}T00:00:00Z`).getUTCDay(), 1, `${w.date} is a Monday`);
      assert.equal(w.date, day(last - (11 - i) * WEEK), 'consecutive weeks, ascending');
    });
    return { ...body, lastMonday: last } as {
      team_id: string; number_of_users: number; number_of_connected_sources: number; number_of_connected_sources_by_week: Week[]; lastMonday: number;
    };
  };
  const total = async (key = team.key) => (await call('GET', '/v2/user/?limit=0', key)).json().total as number;
  /** The connection times of the team's live users, from the tables. */
  const connectionTimes = async (teamId: string) =>
    (await sql<{ t: Date }[]>`SELECT us.created_on AS t FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${teamId}`)
      .map((r) => r.t.getTime());
  const linkCount = async (teamId: string) => {
    const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${teamId}`;
    return row!.n;
  };

  /** What is kept for the team agrees with a recount of its users (src/users/recount.ts). */
  const assertKeptCountsRight = async (teamId: string, what: string) => {
    assert.deepEqual((await recountTeams(sql, [teamId])).drifts, [], `kept counts after ${what}`);
  };
  /** The answer agrees with the tables: users, connections, and the weekly series from the connection times. */
  const assertMetricsAgree = async (t: TestTeam, what: string) => {
    const m = await metrics(t.key);
    assert.equal(m.team_id, t.teamId);
    assert.equal(m.number_of_users, await total(t.key), `number_of_users is the list's total after ${what}`);
    assert.equal(m.number_of_connected_sources, await linkCount(t.teamId), `number_of_connected_sources after ${what}`);
    assert.deepEqual(m.number_of_connected_sources_by_week, seriesOf(await connectionTimes(t.teamId), m.lastMonday), `series after ${what}`);
    await assertKeptCountsRight(t.teamId, what);
    return m;
  };

  it("answers a team without users with zeros, twelve Mondays ending with this week's", async () => {
    const empty = await teamWithKey(sql, 'metrics empty');
    const m = await metrics(empty.key);
    assert.equal(m.team_id, empty.teamId);
    assert.equal(m.number_of_users, 0);
    assert.equal(m.number_of_connected_sources, 0);
    assert.deepEqual(m.number_of_connected_sources_by_week.map((w) => [w.value, w.all]), Array(12).fill([0, 0]));
    assert.equal(m.number_of_connected_sources_by_week.at(-1)!.date, day(mondayOf(Date.now())));
  });

  it('answers from memory while the team is unchanged, and reads again once its version moves', async () => {
    const kept = await teamWithKey(sql, 'metrics kept');
    assert.equal((await metrics(kept.key)).number_of_users, 0);
    // Behind the service's back and without a new version: an answer from memory does not see it.
    await sql`UPDATE teams SET user_count = user_count + 1000 WHERE team_id = ${kept.teamId}`;
    assert.equal((await metrics(kept.key)).number_of_users, 0);
    // Every write of the service raises the version in its transaction; so does this one.
    await sql`UPDATE teams SET version = version + 1 WHERE team_id = ${kept.teamId}`;
    assert.equal((await metrics(kept.key)).number_of_users, 1000);
    await sql`UPDATE teams SET user_count = user_count - 1000, version = version + 1 WHERE team_id = ${kept.teamId}`;
  });

  it('moves its twelve weeks on when a new week starts, whatever it answered before', async () => {
    const weekly = await teamWithKey(sql, 'metrics weeks');
    mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      const before = (await metrics(weekly.key)).number_of_connected_sources_by_week.at(-1)!.date;
      mock.timers.tick(7 * 86_400_000);
      const after = (await metrics(weekly.key)).number_of_connected_sources_by_week.at(-1)!.date;
      assert.equal(after, day(mondayOf(Date.now())));
      assert.notEqual(after, before);
    } finally {
      mock.timers.reset();
    }
  });

  it('wants a key', async () => {
    assert.equal((await app.inject({ url: '/v2/user/metrics' })).statusCode, 401);
  });

  it("number_of_users follows the list's total through creates, deletes and undos", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await call('POST', '/v2/user/', team.key, { client_user_id: `tm-create-${randomUUID()}` });
      assert.equal(res.statusCode, 200);
      ids.push(res.json().user_id);
      assert.equal((await metrics()).number_of_users, await total());
    }
    assert.equal((await metrics()).number_of_users, 5);
    await call('DELETE', `/v2/user/${ids[1]}`);
    await call('DELETE', `/v2/user/${ids[3]}`);
    assert.equal((await metrics()).number_of_users, 3);
    assert.equal((await metrics()).number_of_users, await total());
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${ids[1]}`)).statusCode, 200);
    assert.equal((await metrics()).number_of_users, 4);
    assert.equal((await metrics()).number_of_users, await total());
    // Refused operations change nothing.
    await call('DELETE', `/v2/user/${ids[3]}`);
    await call('POST', `/v2/user/undo_delete?user_id=${ids[0]}`);
    await call('POST', '/v2/user/', team.key, { client_user_id: (await call('GET', `/v2/user/${ids[0]}`)).json().client_user_id });
    assert.equal((await metrics()).number_of_users, 4);
    await assertMetricsAgree(team, 'creates, deletes and undos');
  });

  it('concurrent creates and deletes are all counted', async () => {
    const created = await Promise.all(Array.from({ length: 12 }, () => call('POST', '/v2/user/', team.key, { client_user_id: `tm-par-${randomUUID()}` })));
    const ids = created.map((r) => r.json().user_id as string);
    await Promise.all([
      ...ids.slice(0, 6).map((id) => call('DELETE', `/v2/user/${id}`)),
      ...Array.from({ length: 6 }, () => call('POST', '/v2/user/', team.key, { client_user_id: `tm-par-${randomUUID()}` })),
    ]);
    await Promise.all(ids.slice(0, 3).map((id) => call('POST', `/v2/user/undo_delete?user_id=${id}`)));
    await assertMetricsAgree(team, 'concurrent creates, deletes and undos');
  });

  describe('connections', () => {
    const M0 = mondayOf(Date.now());
    /** A Wednesday afternoon `weeksAgo` weeks before this week's Monday (negative: in the future). */
    const midweek = (weeksAgo: number) => M0 - weeksAgo * WEEK + 2 * DAY + 15 * 3600_000;
    const records: Record<string, any>[] = [];

    it('imports count connections by the week they were made: value per week, all up to its end', async () => {
      const before = await metrics();
      const users = [
        [midweek(0), midweek(1), midweek(3)],
        [midweek(0), midweek(3), midweek(11)],
        [midweek(3), midweek(12), midweek(30)],
        [midweek(100), midweek(-3)], // an old one and one in the future
        [midweek(5)],
        [],
      ].map((times) => record(team.teamId, times.map(iso)));
      // Offsets other than UTC: 00:30 on last week's Monday at +01:00 is Sunday 23:30 UTC, two weeks ago;
      // 23:30 on a Sunday at -02:00 is Monday 01:30 UTC, four weeks ago.
      const lastMonday = new Date(M0 - WEEK).toISOString().slice(0, 10);
      const sunday = new Date(M0 - 4 * WEEK - DAY).toISOString().slice(0, 10);
      users.push(record(team.teamId, [`${lastMonday}T00:30:00+01:00`, `${sunday}T23:30:00.123456-02:00`]));
      records.push(...users);
      await importUsers(sql, lines(users));

      const m = await assertMetricsAgree(team, 'an import');
      const times = users.flatMap((u) => u.connected_sources.map((cs: { created_on: string }) => Date.parse(cs.created_on)));
      assert.equal(m.number_of_connected_sources, before.number_of_connected_sources + times.length);
      assert.equal(m.number_of_users, before.number_of_users + users.length);
      // Exactly, from the times written in the file (the team's created users have no connections).
      assert.deepEqual(m.number_of_connected_sources_by_week, seriesOf(times, m.lastMonday));
      const byDate = new Map(m.number_of_connected_sources_by_week.map((w) => [w.date, w]));
      assert.equal(byDate.get(day(M0))!.value, 2);
      assert.equal(byDate.get(day(M0 - 3 * WEEK))!.value, 3);
      assert.equal(byDate.get(day(M0 - 2 * WEEK))!.value, 1, 'Sunday 23:30 UTC counts in its own week');
      assert.equal(byDate.get(day(M0 - 4 * WEEK))!.value, 1, 'Monday 01:30 UTC counts in its own week');
      assert.equal(byDate.get(day(M0 - 11 * WEEK))!.value, 1);
      assert.equal(byDate.get(day(M0))!.all, times.length - 1, 'all of this week: every connection but the one in the future');
      assert.equal(byDate.get(day(M0 - 11 * WEEK))!.all, 3 + 1, 'the oldest week of the window: its own and the three older ones');
    });

    it("a deregister takes the connection out of its week's value and of the later weeks' all", async () => {
      const before = await metrics();
      const user = records[1]!; // connections 0, 3 and 11 weeks ago, in that order of sources
      const slug = user.connected_sources[1].source.slug; // the one of 3 weeks ago
      assert.equal((await call('DELETE', `/v2/user/${user.user_id}/${slug}`)).statusCode, 200);
      const m = await assertMetricsAgree(team, 'a deregister');
      assert.equal(m.number_of_connected_sources, before.number_of_connected_sources - 1);
      const at = m.number_of_connected_sources_by_week.findIndex((w) => w.date === day(M0 - 3 * WEEK));
      m.number_of_connected_sources_by_week.forEach((w, i) => {
        const was = before.number_of_connected_sources_by_week[i]!;
        assert.equal(w.value, was.value - (i === at ? 1 : 0), w.date);
        assert.equal(w.all, was.all - (i >= at ? 1 : 0), w.date);
      });
    });

    it('a deleted user takes its connections out; undo brings the user back without them', async () => {
      const before = await metrics();
      const user = records[0]!; // 0, 1 and 3 weeks ago
      assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
      let m = await assertMetricsAgree(team, 'a delete');
      assert.equal(m.number_of_connected_sources, before.number_of_connected_sources - 3);
      assert.equal(m.number_of_users, before.number_of_users - 1);
      assert.equal(m.number_of_connected_sources_by_week.at(-1)!.value, before.number_of_connected_sources_by_week.at(-1)!.value - 1);
      assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${user.user_id}`)).statusCode, 200);
      m = await assertMetricsAgree(team, 'an undo');
      assert.equal(m.number_of_users, before.number_of_users);
      assert.equal(m.number_of_connected_sources, before.number_of_connected_sources - 3);
    });

    it('an import that changes connections moves them between weeks', async () => {
      const user = records[2]!; // 3, 12 and 30 weeks ago
      const changed = {
        ...user,
        connected_sources: [
          { created_on: iso(midweek(6)), source: SOURCES[0]! }, // moved from 3 weeks ago to 6
          // SOURCES[1] (12 weeks ago) removed, SOURCES[2] (30 weeks ago) kept
          user.connected_sources[2],
          { created_on: iso(midweek(0)), source: SOURCES[4]! }, // new, this week
        ],
      };
      // With a new user of the team too: merged, the team's older users renumbered around it.
      const newcomer = record(team.teamId, [iso(midweek(2))], iso(Date.now() - 800 * DAY));
      await importUsers(sql, lines([changed, newcomer]));
      records[2] = changed;
      await assertMetricsAgree(team, 'an import that changes connections');
      // The same file again changes nothing.
      const before = await metrics();
      await importUsers(sql, lines([changed, newcomer]));
      assert.deepEqual(await metrics(), before);
    });

    it("another team's activity never shows", async () => {
      const before = await metrics();
      const theirs = [record(other.teamId, [iso(midweek(0)), iso(midweek(1))]), record(other.teamId, [iso(midweek(3))])];
      await importUsers(sql, lines(theirs));
      const created = await call('POST', '/v2/user/', other.key, { client_user_id: `tm-other-${randomUUID()}` });
      await call('DELETE', `/v2/user/${theirs[0]!.user_id}/${SOURCES[1]!.slug}`, other.key);
      await call('DELETE', `/v2/user/${theirs[1]!.user_id}`, other.key);
      await call('DELETE', `/v2/user/${created.json().user_id}`, other.key);
      assert.deepEqual(await metrics(), before, 'our metrics unchanged');
      const m = await assertMetricsAgree(other, "the other team's operations");
      assert.equal(m.number_of_users, 1);
      assert.equal(m.number_of_connected_sources, 1);
      // Our key cannot reach their users either way.
      assert.equal((await call('DELETE', `/v2/user/${theirs[0]!.user_id}/${SOURCES[0]!.slug}`)).statusCode, 404);
      assert.deepEqual(await metrics(other.key), m);
    });

    it('concurrent deregisters, deletes and patches of the same users keep the counts right', async () => {
      const users = Array.from({ length: 20 }, (_, i) => record(team.teamId, [iso(midweek(i % 4)), iso(midweek(5)), iso(midweek(40))]));
      await importUsers(sql, lines(users));
      const slug = (u: Record<string, any>, i: number) => u.connected_sources[i].source.slug as string;
      const answers = await Promise.all([
        ...users.slice(0, 10).map((u) => call('DELETE', `/v2/user/${u.user_id}/${slug(u, 0)}`)),
        ...users.slice(5, 15).map((u) => call('DELETE', `/v2/user/${u.user_id}`)),
        ...users.slice(10, 15).map((u) => call('DELETE', `/v2/user/${u.user_id}/${slug(u, 1)}`)),
        ...users.slice(0, 5).map((u) => call('DELETE', `/v2/user/${u.user_id}/${slug(u, 2)}`)),
        ...users.slice(15, 20).map((u) => app.inject({ method: 'PATCH', url: `/v2/user/${u.user_id}`, headers: { 'x-service-api-key': team.key }, payload: { fallback_time_zone: 'UTC' } })),
      ]);
      for (const res of answers) assert.ok([200, 204, 404].includes(res.statusCode), res.body);
      await assertMetricsAgree(team, 'concurrent deregisters, deletes and patches');
      // Each user's document is still the one its columns and connections make.
      assert.deepEqual(await documentDrifts(sql, { teamIds: [team.teamId] }), []);
    });

    it('after the whole sequence the kept counters equal a count from scratch', async () => {
      await assertKeptCountsRight(team.teamId, 'the sequence');
      await assertKeptCountsRight(other.teamId, 'the sequence');
    });
  });
});

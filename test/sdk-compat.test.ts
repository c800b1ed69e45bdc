/**
 * The upstream's own Node SDK, configured as its README says (`apiKey` and,
 * to point it at us, `baseUrl`; nothing else), must drive every route of the
 * contract's section 1 through its own methods, parse our answers, and map
 * our errors to its error classes. What the SDK calls (read from
 * node_modules/@tryvital/vital-node/dist/cjs/api/resources/{user,team}/client/Client.js):
 *   user.getAll              GET    v2/user
 *   user.get                 GET    v2/user/{user_id}
 *   user.getByClientUserId   GET    v2/user/resolve/{client_user_id}
 *   user.create              POST   v2/user
 *   user.patch               PATCH  v2/user/{user_id}
 *   user.delete              DELETE v2/user/{user_id}
 *   user.undoDelete          POST   v2/user/undo_delete?user_id=…|client_user_id=…
 *   user.getConnectedProviders GET  v2/user/providers/{user_id}
 *   user.deregisterProvider  DELETE v2/user/{user_id}/{provider}
 *   user.getTeamMetrics      GET    v2/user/metrics
 *   team.getUserById         GET    v2/team/users/search?query_id=…
 *   link.connectDemoProvider POST   v2/link/connect/demo
 * How the SDK surfaces errors: every method maps 422 to
 * UnprocessableEntityError (its body parsed as HTTPValidationError), create
 * also maps 400 to BadRequestError; every other status (401, 404, 409, and
 * PATCH's 400) is a plain VitalError carrying statusCode and the parsed body.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { VitalClient, Vital, VitalError, serialization } from '@tryvital/vital-node';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { importUsers } from '../src/import/import.js';
import {
  byListOrder, generateUsers, lines, teamWithKey, testApp, testSql, withSortedSources, type TeamWithUsers,
} from './helpers.js';

type Rec = Record<string, any>;
const DAY_MS = 86_400_000;
const WEEK_MS = 7 * DAY_MS;

/** A generated record's sources in the contract's order, as [slug, created_on ms]. */
const sourcesOf = (u: Rec): [string, number][] =>
  withSortedSources(u).connected_sources.map((cs: Rec) => [cs.source.slug as string, Date.parse(cs.created_on as string)]);

/** Asserts that `call` is refused by the SDK as a VitalError with this status and body; returns the error. */
async function refused(call: Promise<unknown>, status: number, body?: unknown, what = ''): Promise<VitalError> {
  let caught: unknown;
  await assert.rejects(call, (err: unknown) => { caught = err; return true; });
  assert.ok(caught instanceof VitalError, `${what}: expected a VitalError, got ${String(caught)}`);
  assert.equal(caught.statusCode, status, `${what}: ${JSON.stringify(caught.body)}`);
  if (body !== undefined) assert.deepEqual(caught.body, body, what);
  return caught;
}

/** Asserts a 422 as the SDK surfaces it, every item parsing as its ValidationError; returns the parsed items. */
async function invalid(call: Promise<unknown>, what: string): Promise<(Vital.ValidationError & Rec)[]> {
  let caught: unknown;
  await assert.rejects(call, (err: unknown) => { caught = err; return true; });
  assert.ok(caught instanceof Vital.UnprocessableEntityError, `${what}: got ${String(caught)}`);
  assert.equal(caught.statusCode, 422);
  const detail = (caught.body as { detail: unknown[] }).detail;
  assert.ok(Array.isArray(detail) && detail.length > 0, `${what}: ${JSON.stringify(caught.body)}`);
  return detail.map((item) => serialization.ValidationError.parseOrThrow(item, { unrecognizedObjectKeys: 'passthrough' }) as Vital.ValidationError & Rec);
}

const hasLoc = (items: Vital.ValidationError[], loc: (string | number)[]) => items.some((i) => JSON.stringify(i.loc) === JSON.stringify(loc));

describe('official SDK (@tryvital/vital-node) against this service', () => {
  let sql: Sql;
  let app: App;
  let baseUrl: string;
  /** Read-only: nothing in this file changes it. */
  let team: TeamWithUsers;
  /** The team the writing tests change. */
  let writes: TeamWithUsers;
  let client: VitalClient;
  let writer: VitalClient;

  /** The SDK exactly as its README configures it, pointed at us; no retries, so that a failure shows at once. */
  const sdkFor = (apiKey: string) => new VitalClient({ apiKey, baseUrl, maxRetries: 0 });

  /** A team holding `records`, imported as the other tests' fixtures are (helpers' teamWithUsers, with chosen records). */
  async function teamOf(sql: Sql, records: Rec[]): Promise<TeamWithUsers> {
    const t = await teamWithKey(sql);
    const users = records.map((u) => ({ ...u, team_id: t.teamId }));
    await importUsers(sql, lines(users));
    return { ...t, users };
  }

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
    // Generated users with a random seed; picked so that each team surely has users with two or more sources.
    const pool = generateUsers(120);
    const rich = pool.filter((u) => u.connected_sources.length >= 2);
    const rest = pool.filter((u) => u.connected_sources.length < 2);
    assert.ok(rich.length >= 6 && rest.length >= 16, `generator gave ${rich.length} users with 2+ sources of ${pool.length}`);
    const readUsers = [...rich.slice(0, 3), ...rest.slice(0, 9)];
    // Some connections inside the metrics' twelve-week window (the generator dates them 2023 to early 2026).
    const now = Date.now();
    const recent = [now - 3600_000, now - 10 * DAY_MS, now - 40 * DAY_MS, now - 200 * DAY_MS];
    readUsers.slice(0, 2).flatMap((u) => u.connected_sources.slice(0, 2)).forEach((cs: Rec, i: number) => {
      cs.created_on = new Date(recent[i]!).toISOString().replace('Z', '+00:00');
    });
    team = await teamOf(sql, readUsers);
    writes = await teamOf(sql, [...rich.slice(3, 6), ...rest.slice(9, 16)]);
    client = sdkFor(team.key);
    writer = sdkFor(writes.key);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  /** Every user of the caller's team, through the SDK. */
  const everyone = async (c: VitalClient) => {
    const page = await c.user.getAll({ limit: 500 });
    assert.ok(page.total <= 500);
    return page;
  };

  describe('authentication: apiKey alone', () => {
    it('the SDK configured with apiKey alone is accepted; a wrong apiKey is a 401', async () => {
      const page = await sdkFor(team.key).user.getAll();
      assert.equal(page.total, team.users.length);
      const wrong = `${team.key.slice(0, -4)}${team.key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
      const err = await refused(sdkFor(wrong).user.getAll(), 401, undefined, 'wrong apiKey');
      assert.equal(typeof (err.body as { detail: unknown }).detail, 'string');
      assert.ok(err.rawResponse?.headers.get('www-authenticate'), 'a 401 carries WWW-Authenticate');
    });

    it('with a wrong apiKey every route answers 401 before looking at the request', async () => {
      const bad = sdkFor('not-a-key');
      const calls: [string, () => Promise<unknown>][] = [
        ['getAll', () => bad.user.getAll({ limit: 501 })],
        ['get', () => bad.user.get('not-a-uuid')],
        ['getByClientUserId', () => bad.user.getByClientUserId(team.users[0]!.client_user_id)],
        ['create', () => bad.user.create({ clientUserId: `never-${Date.now()}` })],
        ['patch', () => bad.user.patch(team.users[0]!.user_id, {})],
        ['delete', () => bad.user.delete(team.users[0]!.user_id)],
        ['undoDelete', () => bad.user.undoDelete({})],
        ['getConnectedProviders', () => bad.user.getConnectedProviders('not-a-uuid')],
        ['deregisterProvider', () => bad.user.deregisterProvider(team.users[0]!.user_id, 'oura')],
        ['getTeamMetrics', () => bad.user.getTeamMetrics()],
        ['team.getUserById', () => bad.team.getUserById({ queryId: 'x' })],
      ];
      for (const [what, call] of calls) await refused(call(), 401, undefined, what);
      assert.equal((await client.user.get(team.users[0]!.user_id)).userId, team.users[0]!.user_id, 'nothing was changed');
    });

    it('when both headers are sent, x-service-api-key wins', async () => {
      const wrong = 'not-a-key';
      const oursRight = new VitalClient({ apiKey: wrong, baseUrl, maxRetries: 0, headers: { 'x-service-api-key': team.key } });
      assert.equal((await oursRight.user.getAll({ limit: 0 })).total, team.users.length);
      const oursWrong = new VitalClient({ apiKey: team.key, baseUrl, maxRetries: 0, headers: { 'x-service-api-key': wrong } });
      await refused(oursWrong.user.getAll({ limit: 0 }), 401);
    });
  });

  describe('reads', () => {
    it('user.getAll parses our pages, in our order; limit 0 counts; past the end is empty', async () => {
      const expected = [...team.users as { created_on: string; user_id: string }[]].sort(byListOrder);
      const first = await client.user.getAll({ offset: 0, limit: 5 });
      assert.equal(first.total, expected.length);
      assert.equal(first.offset, 0);
      assert.equal(first.limit, 5);
      assert.deepEqual(first.users.map((u) => u.userId), expected.slice(0, 5).map((u) => u.user_id));
      const last = await client.user.getAll({ offset: 10, limit: 5 });
      assert.deepEqual(last.users.map((u) => u.userId), expected.slice(10).map((u) => u.user_id));
      const all = await client.user.getAll();
      assert.equal(all.limit, 100);
      assert.equal(all.offset, 0);
      assert.deepEqual(all.users.map((u) => u.userId), expected.map((u) => u.user_id));
      for (const u of all.users) assert.ok(u.createdOn instanceof Date && u.teamId === team.teamId);
      const none = await client.user.getAll({ limit: 0 });
      assert.deepEqual(none.users, []);
      assert.equal(none.total, expected.length);
      assert.equal(none.limit, 0);
      const past = await client.user.getAll({ offset: expected.length + 3, limit: 5 });
      assert.deepEqual(past.users, []);
      assert.equal(past.total, expected.length);
      assert.equal(past.offset, expected.length + 3);
    });

    it('user.get parses the User object, dates and connected sources included', async () => {
      for (const source of team.users) {
        const user = await client.user.get(source.user_id);
        assert.equal(user.userId, source.user_id);
        assert.equal(user.teamId, team.teamId);
        assert.equal(user.clientUserId, source.client_user_id);
        assert.ok(user.createdOn instanceof Date);
        assert.equal(user.createdOn.getTime(), Date.parse(source.created_on));
        assert.deepEqual(user.connectedSources.map((cs) => [cs.source.slug, cs.createdOn.getTime()]), sourcesOf(source));
        for (const cs of user.connectedSources) {
          assert.ok(cs.createdOn instanceof Date);
          assert.deepEqual(cs.provider, cs.source);
          const want = (source.connected_sources as Rec[]).find((c) => c.source.slug === cs.source.slug)!.source;
          assert.deepEqual({ ...cs.source }, want);
        }
        assert.equal(user.fallbackTimeZone?.id, source.fallback_time_zone?.id);
        assert.equal(user.fallbackTimeZone?.sourceSlug, source.fallback_time_zone?.source_slug);
        assert.equal(user.fallbackTimeZone?.updatedAt.getTime(), source.fallback_time_zone ? Date.parse(source.fallback_time_zone.updated_at) : undefined);
        assert.equal(user.fallbackBirthDate?.value, source.fallback_birth_date?.value);
        assert.equal(user.ingestionStart, source.ingestion_start ?? undefined);
        assert.equal(user.ingestionEnd, source.ingestion_end ?? undefined);
      }
    });

    it('user.getByClientUserId resolves to the same user as user.get', async () => {
      const source = team.users[1]!;
      assert.deepEqual(await client.user.getByClientUserId(source.client_user_id), await client.user.get(source.user_id));
    });

    it('unknown users are 404s the SDK reports with our details', async () => {
      await refused(client.user.getByClientUserId(`missing-${Date.now()}`), 404, { detail: 'User not found' });
      await refused(client.user.get(randomUUID()), 404, { detail: 'Not found' });
      // Another team's user: the same answers as an unknown one.
      await refused(client.user.get(writes.users[0]!.user_id), 404, { detail: 'Not found' });
      await refused(client.user.getByClientUserId(writes.users[0]!.client_user_id), 404, { detail: 'User not found' });
    });

    it('team.getUserById searches the team by user_id and by client_user_id', async () => {
      const source = team.users[2]!;
      const user = await client.user.get(source.user_id);
      assert.deepEqual(await client.team.getUserById({ queryId: source.user_id }), [user]);
      assert.deepEqual(await client.team.getUserById({ queryId: source.client_user_id }), [user]);
      assert.deepEqual(await client.team.getUserById({ queryId: `missing-${Date.now()}` }), []);
      assert.deepEqual(await client.team.getUserById({ queryId: writes.users[0]!.user_id }), [], 'another team\'s user is not found');
      const short = await invalid(client.team.getUserById({ queryId: 'x' }), 'query_id too short');
      assert.ok(short.some((i) => i.type === 'string_too_short' && JSON.stringify(i.loc) === '["query","query_id"]'), JSON.stringify(short));
      assert.ok(hasLoc(await invalid(client.team.getUserById(), 'no query_id'), ['query', 'query_id']));
    });

    it('user.getConnectedProviders lists the connected sources with their status', async () => {
      for (const source of team.users) {
        const answer = await client.user.getConnectedProviders(source.user_id);
        assert.deepEqual(Object.keys(answer), ['providers']);
        const providers = answer.providers!;
        const want = withSortedSources(source).connected_sources as Rec[];
        assert.equal(providers.length, want.length);
        providers.forEach((p, i) => {
          const cs = want[i]!;
          assert.equal(p.name, cs.source.name);
          assert.equal(p.slug, cs.source.slug);
          assert.equal(p.logo, cs.source.logo);
          assert.ok(p.createdOn instanceof Date);
          assert.equal(p.createdOn.getTime(), Date.parse(cs.created_on));
          assert.equal(p.status, 'connected');
          assert.equal(p.externalUserId, undefined);
          assert.equal(p.errorDetails, undefined);
          assert.deepEqual(p.resourceAvailability, {});
        });
      }
      const gone = { detail: 'The user does not or no longer exists in this team' };
      await refused(client.user.getConnectedProviders(randomUUID()), 404, gone);
      await refused(client.user.getConnectedProviders(writes.users[0]!.user_id), 404, gone);
      assert.ok(hasLoc(await invalid(client.user.getConnectedProviders('not-a-uuid'), 'bad user id'), ['path', 'user_id']));
    });

    it('user.getTeamMetrics counts the team, its connections, and them by week', async () => {
      const metrics = await client.user.getTeamMetrics();
      const connections = team.users.flatMap((u) => (u.connected_sources as Rec[]).map((cs) => Date.parse(cs.created_on)));
      assert.equal(metrics.teamId, team.teamId);
      assert.equal(metrics.numberOfUsers, (await client.user.getAll({ limit: 0 })).total);
      assert.equal(metrics.numberOfConnectedSources, connections.length);
      assert.equal(metrics.numberOfErroredConnectedSources, 0);
      assert.equal(metrics.numberOfOrderedTests, 0);
      const weeks = metrics.numberOfConnectedSourcesByWeek!;
      assert.equal(weeks.length, 12);
      const now = Date.now();
      const lastStart = weeks.at(-1)!.date.getTime();
      assert.ok(lastStart <= now && now < lastStart + WEEK_MS, `the last point is this week: ${weeks.at(-1)!.date.toISOString()}`);
      weeks.forEach((point, i) => {
        assert.ok(point.date instanceof Date);
        const start = point.date.getTime();
        if (i > 0) assert.equal(start - weeks[i - 1]!.date.getTime(), WEEK_MS, 'weekly points');
        assert.equal(point.value, connections.filter((t) => t >= start && t < start + WEEK_MS).length, `value of ${point.date.toISOString()}`);
        assert.equal(point.all, connections.filter((t) => t < start + WEEK_MS).length, `all of ${point.date.toISOString()}`);
      });
      assert.ok(weeks.some((p) => p.value > 0), 'the fixture has connections in the window');
    });
  });

  describe('writes', () => {
    it('user.create answers the whole user, the same one user.get then reads', async () => {
      const clientUserId = `sdk-${Date.now()}`;
      const totalBefore = (await writer.user.getAll({ limit: 0 })).total;
      const startedAt = Date.now();
      const created = await writer.user.create({
        clientUserId, fallbackTimeZone: 'Europe/London', fallbackBirthDate: '1980-03-13', ingestionStart: '2024-01-01', ingestionEnd: '2024-12-31',
      });
      const finishedAt = Date.now();
      // This SDK version types create's answer as ClientFacingUserKey {userId, clientUserId}: it parses those and
      // passes the rest of the whole user through unparsed (snake_case). Parsed as the SDK's ClientFacingUser:
      const { userId, clientUserId: answeredClientUserId, ...rest } = created as Vital.ClientFacingUserKey & Rec;
      assert.equal(answeredClientUserId, clientUserId);
      const whole = serialization.ClientFacingUser.parseOrThrow({ ...rest, user_id: userId, client_user_id: answeredClientUserId });
      assert.equal(whole.userId, userId);
      assert.equal(whole.teamId, writes.teamId);
      assert.equal(whole.clientUserId, clientUserId);
      assert.ok(whole.createdOn instanceof Date);
      assert.ok(whole.createdOn.getTime() >= startedAt - 5000 && whole.createdOn.getTime() <= finishedAt + 5000, whole.createdOn.toISOString());
      assert.deepEqual(whole.connectedSources, []);
      assert.equal(whole.fallbackTimeZone?.id, 'Europe/London');
      assert.equal(whole.fallbackTimeZone?.sourceSlug, 'manual');
      assert.ok(whole.fallbackTimeZone?.updatedAt instanceof Date);
      assert.equal(whole.fallbackBirthDate?.value, '1980-03-13');
      assert.equal(whole.fallbackBirthDate?.sourceSlug, 'manual');
      assert.equal(whole.ingestionStart, '2024-01-01');
      assert.equal(whole.ingestionEnd, '2024-12-31');
      assert.deepEqual(await writer.user.get(userId), whole);
      assert.deepEqual(await writer.user.getByClientUserId(clientUserId), whole);
      assert.equal((await writer.user.getAll({ limit: 0 })).total, totalBefore + 1);
      const bare = await writer.user.create({ clientUserId: `${clientUserId}-bare` });
      const bareUser = await writer.user.get(bare.userId);
      assert.equal(bareUser.fallbackTimeZone, undefined);
      assert.equal(bareUser.fallbackBirthDate, undefined);
      assert.equal((bare as Vital.ClientFacingUserKey & Rec).fallback_time_zone, null, 'unset fields are null in the answer');
    });

    it('a duplicate client_user_id on create surfaces as BadRequestError with the upstream detail', async () => {
      const existing = writes.users[0]!;
      const totalBefore = (await writer.user.getAll({ limit: 0 })).total;
      await assert.rejects(writer.user.create({ clientUserId: existing.client_user_id }), (err: unknown) => {
        assert.ok(err instanceof Vital.BadRequestError, `got ${String(err)}`);
        assert.equal(err.statusCode, 400);
        const detail = (err.body as { detail: Record<string, unknown> }).detail;
        assert.equal(detail.error_type, 'INVALID_REQUEST');
        assert.equal(detail.error_message, 'Client user id already exists.');
        assert.equal(detail.user_id, existing.user_id);
        assert.equal(Date.parse(detail.created_on as string), Date.parse(existing.created_on));
        return true;
      });
      assert.equal((await writer.user.getAll({ limit: 0 })).total, totalBefore);
    });

    it('our 422 surfaces as UnprocessableEntityError whose items parse as the SDK ValidationError', async () => {
      const target = writes.users[1]!.user_id;
      const refusedZone = `tz-${Date.now()}`;
      const cases: [string, () => Promise<unknown>, (string | number)[]][] = [
        ['bad limit', () => writer.user.getAll({ limit: 501 }), ['query', 'limit']],
        ['bad offset', () => writer.user.getAll({ offset: -1 }), ['query', 'offset']],
        ['bad user id', () => writer.user.get('not-a-uuid'), ['path', 'user_id']],
        ['bad user id on patch', () => writer.user.patch('not-a-uuid', { fallbackTimeZone: 'UTC' }), ['path', 'user_id']],
        ['bad user id on delete', () => writer.user.delete('not-a-uuid'), ['path', 'user_id']],
        ['bad birth date', () => writer.user.create({ clientUserId: `bd-${Date.now()}`, fallbackBirthDate: 'yesterday' }), ['body', 'fallback_birth_date']],
        ['bad birth date on patch', () => writer.user.patch(target, { fallbackBirthDate: 'yesterday' }), ['body', 'fallback_birth_date']],
      ];
      for (const [what, call, loc] of cases) {
        const items = await invalid(call(), what);
        assert.ok(hasLoc(items, loc), `${what}: loc ${JSON.stringify(loc)} in ${JSON.stringify(items)}`);
      }
      // A bad zone, in the upstream's words, on create and on patch alike.
      for (const [what, call] of [
        ['bad time zone', () => writer.user.create({ clientUserId: refusedZone, fallbackTimeZone: 'Mars/Olympus' })],
        ['bad time zone on patch', () => writer.user.patch(target, { fallbackTimeZone: 'Mars/Olympus' })],
      ] as [string, () => Promise<unknown>][]) {
        const items = await invalid(call(), what);
        const zone = items.find((i) => JSON.stringify(i.loc) === '["body","fallback_time_zone"]');
        assert.ok(zone, `${what}: ${JSON.stringify(items)}`);
        assert.equal(zone.type, 'value_error');
        assert.equal(zone.msg, 'Value error, Invalid IANA time zone: Mars/Olympus');
        assert.equal(zone.input, 'Mars/Olympus');
      }
      const birth = await invalid(writer.user.patch(target, { fallbackBirthDate: 'yesterday' }), 'bad birth date');
      assert.ok(birth.some((i) => i.type === 'date_from_datetime_parsing'), JSON.stringify(birth));
      assert.equal((await writer.user.get(target)).fallbackTimeZone?.id, writes.users[1]!.fallback_time_zone?.id, 'nothing was patched');
      await refused(writer.user.getByClientUserId(refusedZone), 404, { detail: 'User not found' }, 'nothing was created');
    });

    it('user.patch answers 204, and user.get reads the change back; null clears a field', async () => {
      const source = writes.users[2]!;
      const before = await writer.user.get(source.user_id);
      const startedAt = Date.now();
      const { data, rawResponse } = await writer.user.patch(source.user_id, {
        fallbackTimeZone: 'Asia/Tokyo', fallbackBirthDate: '1975-06-30', ingestionStart: '2024-02-01', ingestionEnd: '2024-03-01',
      }).withRawResponse();
      assert.equal(rawResponse.status, 204);
      assert.equal(data, undefined);
      const changed = await writer.user.get(source.user_id);
      assert.equal(changed.fallbackTimeZone?.id, 'Asia/Tokyo');
      assert.equal(changed.fallbackTimeZone?.sourceSlug, 'manual');
      assert.ok(changed.fallbackTimeZone!.updatedAt.getTime() >= startedAt - 5000);
      assert.equal(changed.fallbackBirthDate?.value, '1975-06-30');
      assert.equal(changed.fallbackBirthDate?.sourceSlug, 'manual');
      assert.equal(changed.ingestionStart, '2024-02-01');
      assert.equal(changed.ingestionEnd, '2024-03-01');
      const { fallbackTimeZone: _tz, fallbackBirthDate: _bd, ingestionStart: _is, ingestionEnd: _ie, ...unchanged } = changed;
      const { fallbackTimeZone: _tz0, fallbackBirthDate: _bd0, ingestionStart: _is0, ingestionEnd: _ie0, ...unchangedBefore } = before;
      assert.deepEqual(unchanged, unchangedBefore, 'the other fields are untouched');

      // The SDK's types have no null; a property present but undefined is what it sends as JSON null.
      await writer.user.patch(source.user_id, { fallbackTimeZone: undefined, ingestionEnd: undefined });
      const cleared = await writer.user.get(source.user_id);
      assert.equal(cleared.fallbackTimeZone, undefined);
      assert.equal(cleared.ingestionEnd, undefined);
      assert.equal(cleared.fallbackBirthDate?.value, '1975-06-30', 'a field not sent is kept');
      assert.equal(cleared.ingestionStart, '2024-02-01');

      const renamed = `renamed-${Date.now()}`;
      await writer.user.patch(source.user_id, { clientUserId: renamed });
      assert.equal((await writer.user.getByClientUserId(renamed)).userId, source.user_id);
      await refused(writer.user.getByClientUserId(source.client_user_id), 404, { detail: 'User not found' });
      await writer.user.patch(source.user_id, { clientUserId: source.client_user_id });
      assert.equal((await writer.user.getByClientUserId(source.client_user_id)).userId, source.user_id);
    });

    it('user.patch errors: nothing to patch 400, null client_user_id 422, taken client_user_id 409, unknown user 404', async () => {
      const source = writes.users[3]!;
      const other = writes.users[4]!;
      await refused(writer.user.patch(source.user_id, {}), 400, { detail: 'Nothing to patch' });
      await refused(writer.user.patch(source.user_id), 400, { detail: 'Nothing to patch' });
      const nulled = await invalid(writer.user.patch(source.user_id, { clientUserId: undefined }), 'client_user_id null');
      assert.ok(nulled.some((i) => JSON.stringify(i.loc) === '["body"]' && i.msg === 'Value error, client_user_id is not a field that can be reset to null.'), JSON.stringify(nulled));
      const conflict = await refused(writer.user.patch(source.user_id, { clientUserId: other.client_user_id }), 409, { detail: 'Client user id already exists' });
      assert.ok(!(conflict instanceof Vital.BadRequestError) && !(conflict instanceof Vital.UnprocessableEntityError));
      assert.equal((await writer.user.get(source.user_id)).clientUserId, source.client_user_id, 'the conflict changed nothing');
      const gone = { detail: 'The user does not or no longer exists in this team' };
      await refused(writer.user.patch(randomUUID(), { fallbackTimeZone: 'UTC' }), 404, gone);
      await refused(writer.user.patch(team.users[0]!.user_id, { fallbackTimeZone: 'UTC' }), 404, gone);
      assert.equal((await client.user.get(team.users[0]!.user_id)).fallbackTimeZone?.id, team.users[0]!.fallback_time_zone?.id, 'another team\'s user is untouched');
    });

    it('user.delete schedules the user for deletion; user.undoDelete by user id restores it without its connections', async () => {
      const source = writes.users[0]!; // two or more sources
      assert.ok(source.connected_sources.length >= 2);
      const before = await writer.user.get(source.user_id);
      const listBefore = await everyone(writer);
      const metricsBefore = await writer.user.getTeamMetrics();

      assert.deepEqual(await writer.user.delete(source.user_id), { success: true });
      const scheduled = { detail: 'You have scheduled this user for deletion.' };
      await refused(writer.user.get(source.user_id), 404, scheduled);
      await refused(writer.user.getByClientUserId(source.client_user_id), 404);
      const listDuring = await everyone(writer);
      assert.equal(listDuring.total, listBefore.total - 1);
      assert.deepEqual(listDuring.users.map((u) => u.userId), listBefore.users.map((u) => u.userId).filter((id) => id !== source.user_id));
      assert.deepEqual(await writer.team.getUserById({ queryId: source.user_id }), []);
      const metricsDuring = await writer.user.getTeamMetrics();
      assert.equal(metricsDuring.numberOfUsers, listDuring.total);
      assert.equal(metricsDuring.numberOfConnectedSources, metricsBefore.numberOfConnectedSources! - before.connectedSources.length);
      const again = { detail: 'The user has been scheduled for deletion as per your previous request' };
      await refused(writer.user.delete(source.user_id), 404, again);
      await refused(writer.user.patch(source.user_id, { fallbackTimeZone: 'UTC' }), 404, again);

      assert.deepEqual(await writer.user.undoDelete({ userId: source.user_id }), { success: true });
      const restored = await writer.user.get(source.user_id);
      assert.deepEqual(restored, { ...before, connectedSources: [] });
      assert.deepEqual((await writer.user.getConnectedProviders(source.user_id)).providers, []);
      const listAfter = await everyone(writer);
      assert.deepEqual(listAfter.users.map((u) => u.userId), listBefore.users.map((u) => u.userId), 'back in its place in the list');
      assert.equal((await writer.user.getTeamMetrics()).numberOfUsers, listAfter.total);
      // Nothing scheduled any more.
      await refused(writer.user.undoDelete({ userId: source.user_id }), 404);
    });

    it('user.undoDelete by client user id; 409 while a live user holds it; 422 without exactly one parameter', async () => {
      const byClient = writes.users[5]!;
      assert.deepEqual(await writer.user.delete(byClient.user_id), { success: true });
      assert.deepEqual(await writer.user.undoDelete({ clientUserId: byClient.client_user_id }), { success: true });
      assert.equal((await writer.user.getByClientUserId(byClient.client_user_id)).userId, byClient.user_id);

      const held = writes.users[6]!;
      assert.deepEqual(await writer.user.delete(held.user_id), { success: true });
      // Its client_user_id is free at once: a new user takes it.
      const squatter = await writer.user.create({ clientUserId: held.client_user_id });
      assert.notEqual(squatter.userId, held.user_id);
      await refused(writer.user.undoDelete({ userId: held.user_id }), 409, { detail: 'Client user id already exists' });
      await refused(writer.user.get(held.user_id), 404, { detail: 'You have scheduled this user for deletion.' });
      await writer.user.patch(squatter.userId, { clientUserId: `moved-${Date.now()}` });
      assert.deepEqual(await writer.user.undoDelete({ userId: held.user_id }), { success: true });
      assert.equal((await writer.user.getByClientUserId(held.client_user_id)).userId, held.user_id);

      await refused(writer.user.undoDelete({ userId: randomUUID() }), 404);
      await refused(writer.user.undoDelete({ clientUserId: `missing-${Date.now()}` }), 404);
      await refused(writer.user.undoDelete({ userId: writes.users[7]!.user_id }), 404, undefined, 'a live user has nothing to undo');
      await invalid(writer.user.undoDelete({}), 'neither parameter');
      await invalid(writer.user.undoDelete({ userId: held.user_id, clientUserId: held.client_user_id }), 'both parameters');
      const gone = { detail: 'The user does not or no longer exists in this team' };
      await refused(writer.user.delete(randomUUID()), 404, gone);
      await refused(writer.user.delete(team.users[0]!.user_id), 404, gone);
      assert.equal((await client.user.get(team.users[0]!.user_id)).userId, team.users[0]!.user_id, 'another team\'s user is untouched');
    });

    it('user.deregisterProvider removes one connection from the providers, the user and the metrics', async () => {
      const source = writes.users[1]!; // two or more sources
      const [[slug], ...kept] = sourcesOf(source) as [[string, number], ...[string, number][]];
      const metricsBefore = await writer.user.getTeamMetrics();

      assert.deepEqual(await writer.user.deregisterProvider(source.user_id, slug as Vital.Providers), { success: true });
      const providers = (await writer.user.getConnectedProviders(source.user_id)).providers!;
      assert.deepEqual(providers.map((p) => [p.slug, p.createdOn.getTime()]), kept);
      const user = await writer.user.get(source.user_id);
      assert.deepEqual(user.connectedSources.map((cs) => [cs.source.slug, cs.createdOn.getTime()]), kept);
      const metrics = await writer.user.getTeamMetrics();
      assert.equal(metrics.numberOfConnectedSources, metricsBefore.numberOfConnectedSources! - 1);
      const list = await everyone(writer);
      assert.equal(metrics.numberOfConnectedSources, list.users.reduce((n, u) => n + u.connectedSources.length, 0));
      assert.equal(metrics.numberOfUsers, list.total);

      const notConnected = { detail: 'Provider not connected' };
      await refused(writer.user.deregisterProvider(source.user_id, slug as Vital.Providers), 404, notConnected);
      const never = Object.values(Vital.Providers).find((p) => !(source.connected_sources as Rec[]).some((cs) => cs.source.slug === p))!;
      await refused(writer.user.deregisterProvider(source.user_id, never), 404, notConnected);
      const gone = { detail: 'The user does not or no longer exists in this team' };
      await refused(writer.user.deregisterProvider(randomUUID(), 'oura'), 404, gone);
      const theirs = team.users.find((u) => u.connected_sources.length > 0)!;
      await refused(writer.user.deregisterProvider(theirs.user_id, theirs.connected_sources[0].source.slug), 404, gone);
      assert.equal((await client.user.get(theirs.user_id)).connectedSources.length, theirs.connected_sources.length, 'another team\'s user is untouched');
      assert.ok(hasLoc(await invalid(writer.user.deregisterProvider('not-a-uuid', 'oura'), 'bad user id'), ['path', 'user_id']));
    });

    it('an unknown provider slug: the SDK refuses it itself; the service answers 422 at path.provider', async () => {
      const source = writes.users[2]!;
      // The SDK serializes `provider` through its Providers enum, which throws on a value outside it: no request is made.
      await assert.rejects(writer.user.deregisterProvider(source.user_id, 'not_a_source' as Vital.Providers), (err: unknown) => {
        assert.ok(!(err instanceof VitalError), `the SDK itself refuses it: ${String(err)}`);
        assert.match(String(err), /enum/i);
        return true;
      });
      // The same request as the SDK would send it (its auth header), to show the service's answer parses as the SDK's 422.
      const res = await fetch(`${baseUrl}/v2/user/${source.user_id}/not_a_source`, { method: 'DELETE', headers: { 'x-vital-api-key': writes.key } });
      assert.equal(res.status, 422);
      const body = serialization.HttpValidationError.parseOrThrow(await res.json(), { unrecognizedObjectKeys: 'passthrough' });
      const items = (body.detail as unknown[]).map((i) => serialization.ValidationError.parseOrThrow(i, { unrecognizedObjectKeys: 'passthrough' }));
      assert.ok(hasLoc(items, ['path', 'provider']), JSON.stringify(items));
    });

    it('link.connectDemoProvider connects a demo source: its answer parses, and the connection shows in the providers', async () => {
      const user = writes.users[3]!;
      const answer = await writer.link.connectDemoProvider({ userId: user.user_id, provider: 'fitbit' });
      assert.deepEqual(answer, { success: true, detail: `Connected user ${user.user_id} to provider fitbit` });
      const providers = await writer.user.getConnectedProviders(user.user_id);
      assert.ok((providers.providers ?? []).some((p) => p.slug === 'fitbit' && p.status === 'connected'));
      assert.deepEqual(await writer.link.connectDemoProvider({ userId: user.user_id, provider: 'fitbit' }), answer, 'again: the same answer');
      await refused(writer.link.connectDemoProvider({ userId: randomUUID(), provider: 'oura' }), 404, { detail: 'Not found' });
    });

    it('user.getTeamMetrics agrees with the list after the changes', async () => {
      const metrics = await writer.user.getTeamMetrics();
      const list = await everyone(writer);
      assert.equal(metrics.teamId, writes.teamId);
      assert.equal(metrics.numberOfUsers, list.total);
      assert.equal(metrics.numberOfConnectedSources, list.users.reduce((n, u) => n + u.connectedSources.length, 0));
      const weeks = metrics.numberOfConnectedSourcesByWeek!;
      assert.equal(weeks.length, 12);
      const connections = list.users.flatMap((u) => u.connectedSources.map((cs) => cs.createdOn.getTime()));
      for (const point of weeks) {
        const end = point.date.getTime() + WEEK_MS;
        assert.equal(point.value, connections.filter((t) => t >= point.date.getTime() && t < end).length);
        assert.equal(point.all, connections.filter((t) => t < end).length);
      }
    });
  });
});

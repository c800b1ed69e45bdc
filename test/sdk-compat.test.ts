/**
 * The upstream's own Node SDK, pointed at this service, must parse our
 * answers and map our errors to its error classes. Paths the SDK calls (read
 * from node_modules/@tryvital/vital-node/dist/cjs/api/resources/user/client/Client.js):
 * getAll GET v2/user, get GET v2/user/{user_id}, create POST v2/user,
 * getByClientUserId GET v2/user/resolve/{client_user_id}: all in our contract.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VitalClient, Vital, VitalError, serialization } from '@tryvital/vital-node';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { byListOrder, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

describe('official SDK (@tryvital/vital-node) against this service', () => {
  let sql: Sql;
  let app: App;
  let baseUrl: string;
  let team: TeamWithUsers;
  let client: VitalClient;

  /**
   * How a team points the SDK at us: baseUrl, and our key in x-service-api-key.
   * The SDK insists on an `apiKey`, which it sends as x-vital-api-key; this
   * service ignores that header, so it gets a placeholder, not the key.
   */
  const sdkFor = (key: string) => new VitalClient({
    baseUrl, apiKey: 'unused-by-this-service', headers: { 'x-service-api-key': key }, maxRetries: 0, timeoutInSeconds: 10,
  });

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
    team = await teamWithUsers(sql, 12);
    client = sdkFor(team.key);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('user.getAll parses our pages, in our order', async () => {
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
    assert.equal(all.users.length, expected.length);
  });

  it('user.get parses the User object, dates and connected sources included', async () => {
    const source = team.users.find((u) => u.connected_sources.length > 0 && u.fallback_time_zone) ?? team.users[0]!;
    const user = await client.user.get(source.user_id);
    assert.equal(user.userId, source.user_id);
    assert.equal(user.teamId, team.teamId);
    assert.equal(user.clientUserId, source.client_user_id);
    assert.ok(user.createdOn instanceof Date);
    assert.equal(user.createdOn.getTime(), Date.parse(source.created_on));
    assert.equal(user.connectedSources.length, source.connected_sources.length);
    for (const cs of user.connectedSources) {
      assert.ok(cs.createdOn instanceof Date && !Number.isNaN(cs.createdOn.getTime()));
      assert.deepEqual(cs.provider, cs.source);
    }
    assert.equal(user.fallbackTimeZone?.id, source.fallback_time_zone?.id);
    assert.equal(user.fallbackBirthDate?.value, source.fallback_birth_date?.value);
  });

  it('user.create then user.getByClientUserId find the same user', async () => {
    const clientUserId = `sdk-${Date.now()}`;
    const created = await client.user.create({ clientUserId, fallbackTimeZone: 'Europe/London', fallbackBirthDate: '1980-03-13' });
    assert.equal(created.clientUserId, clientUserId);
    const resolved = await client.user.getByClientUserId(clientUserId);
    assert.equal(resolved.userId, created.userId);
    assert.equal(resolved.fallbackTimeZone?.id, 'Europe/London');
    assert.equal(resolved.fallbackTimeZone?.sourceSlug, 'manual');
    assert.equal(resolved.fallbackBirthDate?.value, '1980-03-13');
    assert.equal((await client.user.get(created.userId)).clientUserId, clientUserId);
  });

  it('our 400 conflict surfaces as BadRequestError carrying our detail', async () => {
    const existing = team.users[0]!;
    await assert.rejects(client.user.create({ clientUserId: existing.client_user_id }), (err: unknown) => {
      assert.ok(err instanceof Vital.BadRequestError, `got ${String(err)}`);
      assert.equal(err.statusCode, 400);
      const detail = (err.body as { detail: Record<string, unknown> }).detail;
      assert.equal(detail.error_type, 'client_user_id_already_exists');
      assert.equal(detail.user_id, existing.user_id);
      return true;
    });
  });

  it('our 422 surfaces as UnprocessableEntityError whose items parse as the SDK ValidationError', async () => {
    const cases: [string, () => Promise<unknown>, (string | number)[]][] = [
      ['bad limit', () => client.user.getAll({ limit: 501 }), ['query', 'limit']],
      ['bad user id', () => client.user.get('not-a-uuid'), ['path', 'user_id']],
      ['bad time zone', () => client.user.create({ clientUserId: `tz-${Date.now()}`, fallbackTimeZone: 'Mars/Olympus' }), ['body', 'fallback_time_zone']],
    ];
    for (const [what, call, loc] of cases) {
      await assert.rejects(call(), (err: unknown) => {
        assert.ok(err instanceof Vital.UnprocessableEntityError, `${what}: got ${String(err)}`);
        assert.equal(err.statusCode, 422);
        const detail = (err.body as { detail: unknown[] }).detail;
        assert.ok(Array.isArray(detail) && detail.length > 0, what);
        const items = detail.map((item) => serialization.ValidationError.parseOrThrow(item, { unrecognizedObjectKeys: 'passthrough' }));
        assert.ok(items.some((i) => JSON.stringify(i.loc) === JSON.stringify(loc)), `${what}: loc ${JSON.stringify(loc)} in ${JSON.stringify(detail)}`);
        return true;
      });
    }
  });

  it('unknown users are a 404 the SDK reports with our detail', async () => {
    await assert.rejects(client.user.getByClientUserId(`missing-${Date.now()}`), (err: unknown) => {
      assert.ok(err instanceof VitalError);
      assert.equal(err.statusCode, 404);
      assert.deepEqual(err.body, { detail: 'User not found' });
      return true;
    });
  });

  it('the key must be in x-service-api-key: as the SDK apiKey alone it is refused', async () => {
    const upstreamStyle = new VitalClient({ baseUrl, apiKey: team.key, maxRetries: 0 });
    await assert.rejects(upstreamStyle.user.getAll(), (err: unknown) => {
      assert.ok(err instanceof VitalError);
      assert.equal(err.statusCode, 401);
      return true;
    });
  });
});

/**
 * Events (contract section 10): every change of a user or a connection
 * records its event, with the upstream's envelope, in the statement of the
 * change; a change that is refused or rolls back records none; the bulk and
 * merge imports record none. Each event becomes one message per enabled
 * endpoint of the team whose filter_types take it. No dispatcher runs here:
 * the endpoints' URLs never resolve (.invalid).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { importUsers } from '../src/import/import.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { callAs, generateUsers, lines, teamWithKey, testApp, testSql, type TestTeam } from './helpers.js';

interface Recorded { event_id: string; event_type: string; body: Record<string, any> }

describe('events', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithKey(sql, 'events');
  });
  after(async () => {
    await app?.close();
    await sql?.end();
  });

  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, key = team.key) => callAs(app, key, method, url, payload);
  const eventsOf = async (userId: string): Promise<Recorded[]> =>
    (await sql<{ event_id: string; event_type: string; body: string }[]>`
      SELECT event_id, event_type, body FROM events WHERE user_id = ${userId} ORDER BY created_at, event_type`)
      .map((e) => ({ event_id: e.event_id, event_type: e.event_type, body: JSON.parse(e.body) }));
  const create = async (body: object = {}) => {
    const res = await call('POST', '/v2/user/', { client_user_id: `ev-${randomUUID()}`, ...body });
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  };
  const envelope = (type: string, data: unknown, user: { user_id: string; client_user_id: string }) =>
    ({ event_type: type, data, user_id: user.user_id, client_user_id: user.client_user_id, team_id: team.teamId });

  it('create, patch, delete, undo, connect and disconnect each record their event with the envelope', async () => {
    const user = await create({ fallback_time_zone: 'Europe/London' });
    let events = await eventsOf(user.user_id);
    assert.deepEqual(events.map((e) => e.body), [envelope('user.created', user, user)]);
    assert.deepEqual(Object.keys(events[0]!.body), ['event_type', 'data', 'user_id', 'client_user_id', 'team_id'], 'the upstream\'s key order');

    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, { fallback_birth_date: '1980-03-13' })).statusCode, 204);
    const patched = (await call('GET', `/v2/user/${user.user_id}`)).json();
    events = await eventsOf(user.user_id);
    assert.deepEqual(events.at(-1)!.body, envelope('user.updated', patched, patched));

    assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: user.user_id, provider: 'oura' })).statusCode, 200);
    assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: user.user_id, provider: 'fitbit' })).statusCode, 200);
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}/fitbit`)).statusCode, 200);
    const fitbit = { name: 'Fitbit', slug: 'fitbit', logo: 'https://storage.example.com/providers/fitbit.png' };
    events = await eventsOf(user.user_id);
    assert.deepEqual(events.at(-1)!.body, envelope('provider.connection.deleted', { user_id: user.user_id, provider: fitbit, source: fitbit }, user));

    const deletedAt = Date.now();
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
    events = await eventsOf(user.user_id);
    const oura = { name: 'Oura', slug: 'oura', logo: 'https://storage.example.com/providers/oura.png' };
    const [gone, deleted] = events.slice(-2);
    assert.deepEqual(gone!.body, envelope('provider.connection.deleted', { user_id: user.user_id, provider: oura, source: oura }, user),
      'the delete removed the oura connection: its event');
    assert.equal(deleted!.event_type, 'user.deleted');
    assert.deepEqual(Object.keys(deleted!.body.data), ['user_id', 'client_user_id', 'purge_after']);
    assert.deepEqual({ ...deleted!.body.data, purge_after: undefined }, { user_id: user.user_id, client_user_id: user.client_user_id, purge_after: undefined });
    // DELETION_GRACE is 7 days by default.
    const purgeAfter = Date.parse(deleted!.body.data.purge_after);
    assert.ok(Math.abs(purgeAfter - (deletedAt + 7 * 86_400_000)) < 60_000, deleted!.body.data.purge_after);

    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${user.user_id}`)).statusCode, 200);
    const restored = (await call('GET', `/v2/user/${user.user_id}`)).json();
    events = await eventsOf(user.user_id);
    assert.deepEqual(events.at(-1)!.body, envelope('user.restored', restored, restored));
    assert.deepEqual(events.map((e) => e.event_type), [
      'user.created', 'user.updated', 'provider.connection.created', 'provider.connection.created', 'provider.connection.deleted',
      'provider.connection.deleted', 'user.deleted', 'user.restored',
    ]);
  });

  it('creates written together each record their own event', async () => {
    const created = await Promise.all(Array.from({ length: 20 }, () => create()));
    for (const user of created) assert.deepEqual((await eventsOf(user.user_id)).map((e) => e.body), [envelope('user.created', user, user)]);
  });

  it('records nothing for a refused request, a patch that changed nothing, or a change that rolled back', async () => {
    const user = await create({ ingestion_start: '2024-01-01' });
    const holder = await create();
    const count = async () => (await eventsOf(user.user_id)).length + (await eventsOf(holder.user_id)).length;
    const before = await count();
    assert.equal((await call('POST', '/v2/user/', { client_user_id: holder.client_user_id })).statusCode, 400, 'a taken client_user_id');
    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, { client_user_id: holder.client_user_id })).statusCode, 409, 'rolled back by the unique index');
    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, { ingestion_end: '2023-01-01' })).statusCode, 422);
    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, {})).statusCode, 400);
    assert.equal((await call('PATCH', `/v2/user/${user.user_id}`, { ingestion_start: '2024-01-01' })).statusCode, 204, 'the same value again');
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}/oura`)).statusCode, 404);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${user.user_id}`)).statusCode, 404);
    assert.equal(await count(), before);
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
    assert.equal((await call('DELETE', `/v2/user/${user.user_id}`)).statusCode, 404);
    assert.equal(await count(), before + 1, 'the one delete');
  });

  it('the bulk and merge imports record no events', async () => {
    const records: Record<string, any>[] = generateUsers(20).map((u) => ({ ...u, team_id: team.teamId }));
    await importUsers(sql, lines(records.slice(0, 10)), undefined, { method: 'merge' });
    await importUsers(sql, lines(records.slice(10)), undefined, { method: 'merge' });
    const ids = records.map((r) => r.user_id as string);
    const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE user_id = ANY(${ids}::uuid[])`;
    assert.equal(row!.n, 0);
    const fresh = await teamWithKey(sql, 'events bulk');
    const bulk = generateUsers(10).map((u) => ({ ...u, team_id: fresh.teamId }));
    await importUsers(sql, lines(bulk), undefined, { method: 'bulk' });
    const [none] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE team_id = ${fresh.teamId}`;
    assert.equal(none!.n, 0);
  });

  it('fans each event out to the team\'s enabled endpoints whose filter_types take it, in the same statement', async () => {
    const own = await teamWithKey(sql, 'events fan-out');
    const policy = { allowPrivate: false };
    const url = 'https://hooks.example.invalid/in';
    const saved = async (fields: object) => {
      const result = await registerWebhook(sql, own.teamId, { url, ...fields }, policy);
      assert.ok(typeof result === 'object' && 'webhook' in result);
      return result.webhook.id;
    };
    const all = await saved({});
    const deletions = await saved({ filter_types: ['user.deleted'] });
    const disabled = await saved({ disabled: true });
    const otherTeam = await teamWithKey(sql, 'events fan-out other');
    const foreign = await registerWebhook(sql, otherTeam.teamId, { url }, policy);
    assert.ok(typeof foreign === 'object' && 'webhook' in foreign);

    const res = await callAs(app, own.key, 'POST', '/v2/user/', { client_user_id: 'fan-out' });
    const userId = res.json().user_id;
    assert.equal((await callAs(app, own.key, 'DELETE', `/v2/user/${userId}`)).statusCode, 200);
    const messages = await sql<{ endpoint_id: string; event_type: string; status: string; attempts: number }[]>`
      SELECT m.endpoint_id, e.event_type, m.status, m.attempts FROM webhook_messages m JOIN events e USING (event_id)
      WHERE e.user_id = ${userId} ORDER BY e.created_at`;
    const of = (endpoint: string) => messages.filter((m) => m.endpoint_id === endpoint).map((m) => m.event_type);
    assert.deepEqual(of(all), ['user.created', 'user.deleted']);
    assert.deepEqual(of(deletions), ['user.deleted']);
    assert.deepEqual(of(disabled), []);
    assert.deepEqual(of(foreign.webhook.id), []);
    assert.ok(messages.every((m) => m.status === 'pending' && m.attempts === 0));
  });
});

/**
 * POST /v2/link/connect/demo (contract section 9): the connection shows at
 * once in the user, the list, its providers and the team's metrics; a
 * second connect changes nothing; disconnecting works as for any source;
 * the errors; and `hds check` finds the team's kept state as it recounts it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { recountTeams } from '../src/users/recount.js';
import { callAs, twoTeams, type TestTeam } from './helpers.js';

describe('POST /v2/link/connect/demo', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;
  let other: TestTeam;

  twoTeams('connect demo', (f) => ({ sql, app, team, other } = f));

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, key = team.key) => callAs(app, key, method, url, payload);
  const connect = (userId: string, provider: string, key = team.key) => call('POST', '/v2/link/connect/demo', { user_id: userId, provider }, key);
  const newUser = async () => {
    const res = await call('POST', '/v2/user/', { client_user_id: `demo-${randomUUID()}` });
    assert.equal(res.statusCode, 200, res.body);
    return res.json().user_id as string;
  };
  const eventsOf = async (userId: string) =>
    (await sql<{ event_type: string; body: string }[]>`SELECT event_type, body FROM events WHERE user_id = ${userId} ORDER BY created_at, event_type`).map((e) => ({ type: e.event_type, body: JSON.parse(e.body) }));
  const metrics = async () => (await call('GET', '/v2/user/metrics')).json();

  it('connects: 200 with the upstream\'s body; at once in the user, the list, its providers and the metrics; one event', async () => {
    const userId = await newUser();
    const before = await metrics();
    const res = await connect(userId, 'oura');
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { success: true, detail: `Connected user ${userId} to provider oura` });

    const user = (await call('GET', `/v2/user/${userId}`)).json();
    assert.equal(user.connected_sources.length, 1);
    const [link] = user.connected_sources;
    assert.deepEqual(link.source, { name: 'Oura', slug: 'oura', logo: 'https://storage.example.com/providers/oura.png' });
    assert.deepEqual(link.provider, link.source);
    assert.ok(Math.abs(Date.parse(link.created_on) - Date.now()) < 60_000, `connected now: ${link.created_on}`);
    const listed = (await call('GET', '/v2/user/?limit=500')).json().users.find((u: { user_id: string }) => u.user_id === userId);
    assert.deepEqual(listed, user);
    const providers = (await call('GET', `/v2/user/providers/${userId}`)).json();
    assert.deepEqual(providers, { providers: [{ ...link.source, created_on: link.created_on, status: 'connected', external_user_id: null, error_details: null, resource_availability: {} }] });
    const after = await metrics();
    assert.equal(after.number_of_connected_sources, before.number_of_connected_sources + 1);
    assert.equal(after.number_of_connected_sources_by_week.at(-1).value, before.number_of_connected_sources_by_week.at(-1).value + 1);

    const connected = (await eventsOf(userId)).filter((e) => e.type === 'provider.connection.created');
    assert.equal(connected.length, 1);
    assert.deepEqual(connected[0]!.body, {
      event_type: 'provider.connection.created',
      data: { user_id: userId, provider: link.source, source: link.source, resource_availability: {} },
      user_id: userId, client_user_id: user.client_user_id, team_id: team.teamId,
    });
  });

  it('keeps connections in the document\'s order, and a second connect of a source changes nothing and records nothing', async () => {
    const userId = await newUser();
    for (const provider of ['oura', 'fitbit', 'apple_health_kit', 'freestyle_libre']) assert.equal((await connect(userId, provider)).statusCode, 200);
    const user = (await call('GET', `/v2/user/${userId}`)).json();
    assert.deepEqual(user.connected_sources.map((cs: { source: { slug: string } }) => cs.source.slug).sort(), ['apple_health_kit', 'fitbit', 'freestyle_libre', 'oura']);
    const times = user.connected_sources.map((cs: { created_on: string }) => Date.parse(cs.created_on));
    assert.deepEqual(times, [...times].sort((a, b) => a - b), 'in connection time order');
    const events = (await eventsOf(userId)).length;
    const again = await connect(userId, 'fitbit');
    assert.equal(again.statusCode, 200);
    assert.deepEqual(again.json(), { success: true, detail: `Connected user ${userId} to provider fitbit` });
    assert.deepEqual((await call('GET', `/v2/user/${userId}`)).json(), user, 'nothing changed');
    assert.equal((await eventsOf(userId)).length, events, 'no event');
  });

  it('disconnecting works as for any source, with its event; connecting again works', async () => {
    const userId = await newUser();
    assert.equal((await connect(userId, 'freestyle_libre')).statusCode, 200);
    const before = await metrics();
    const res = await call('DELETE', `/v2/user/${userId}/freestyle_libre`);
    assert.equal(res.statusCode, 200);
    assert.deepEqual((await call('GET', `/v2/user/${userId}`)).json().connected_sources, []);
    assert.deepEqual((await call('GET', `/v2/user/providers/${userId}`)).json(), { providers: [] });
    assert.equal((await metrics()).number_of_connected_sources, before.number_of_connected_sources - 1);
    const deleted = (await eventsOf(userId)).filter((e) => e.type === 'provider.connection.deleted');
    assert.equal(deleted.length, 1);
    const source = { name: 'Freestyle Libre', slug: 'freestyle_libre', logo: 'https://storage.example.com/providers/freestyle_libre.png' };
    assert.deepEqual(deleted[0]!.body.data, { user_id: userId, provider: source, source });
    assert.equal((await connect(userId, 'freestyle_libre')).statusCode, 200);
    assert.equal((await call('GET', `/v2/user/${userId}`)).json().connected_sources.length, 1);
  });

  it('answers 404 for a user not in the team, as GET for one scheduled for deletion, and 422 for a provider that is not a demo source', async () => {
    const userId = await newUser();
    for (const id of [randomUUID(), userId]) {
      const res = await connect(id, 'oura', other.key);
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), { detail: 'Not found' });
    }
    assert.equal((await call('DELETE', `/v2/user/${userId}`)).statusCode, 200);
    const scheduled = await connect(userId, 'oura');
    assert.equal(scheduled.statusCode, 404);
    assert.deepEqual(scheduled.json(), { detail: 'You have scheduled this user for deletion.' });

    const live = await newUser();
    for (const provider of ['garmin', 'OURA', '', 7]) {
      const res = await call('POST', '/v2/link/connect/demo', { user_id: live, provider });
      assert.equal(res.statusCode, 422, String(provider));
      assert.ok(res.json().detail.length >= 1);
      for (const item of res.json().detail) assert.deepEqual(item.loc, ['body', 'provider'], String(provider));
    }
    const bad = await call('POST', '/v2/link/connect/demo', { user_id: 'nope', provider: 'oura' });
    assert.equal(bad.statusCode, 422);
    assert.deepEqual(bad.json().detail[0].loc, ['body', 'user_id']);
    assert.equal((await app.inject({ method: 'POST', url: '/v2/link/connect/demo', payload: { user_id: live, provider: 'oura' } })).statusCode, 401);
    const wrongMethod = await call('GET', '/v2/link/connect/demo');
    assert.equal(wrongMethod.statusCode, 405);
    assert.equal(wrongMethod.headers.allow, 'POST');
    assert.deepEqual((await call('GET', `/v2/user/${live}`)).json().connected_sources, [], 'nothing connected by a refused request');
  });

  it('leaves the team\'s kept state as a recount of its users finds it (hds check)', async () => {
    const users = [await newUser(), await newUser(), await newUser()];
    for (const u of users) for (const p of ['oura', 'fitbit']) assert.equal((await connect(u, p)).statusCode, 200);
    assert.equal((await call('DELETE', `/v2/user/${users[0]}/oura`)).statusCode, 200);
    assert.equal((await call('DELETE', `/v2/user/${users[1]}`)).statusCode, 200);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${users[1]}`)).statusCode, 200);
    assert.equal((await connect(users[1]!, 'apple_health_kit')).statusCode, 200);
    assert.deepEqual((await recountTeams(sql, [team.teamId])).drifts, []);
  });
});

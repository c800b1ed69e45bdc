/**
 * Webhook delivery (contract section 10) on a PostgreSQL of its own, with
 * receivers on the loopback: signed deliveries that `svix` and
 * `standardwebhooks` verify, both header families and the custom headers;
 * both secrets signing during a rotation; filter_types; retries with the
 * same webhook-id, then `failed`, and recover; a 410 and a failure streak
 * disable the endpoint; a dead endpoint never delays another; rate_limit;
 * two dispatchers make each attempt once; an endpoint that fails at random
 * still receives every event; the private-address rule at each delivery;
 * the messages route; and no secret or header value in the log.
 * WEBHOOK_RETRY_SCHEDULE is 20 × 10ms here: a test waits on what it
 * expects (with only a bound against a hang), never on a fixed time.
 */
import assert from 'node:assert/strict';
import dns from 'node:dns';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { App } from '../src/app.js';
import { connect, type Sql } from '../src/db/client.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { backlog, recordOutcomes } from '../src/events/claims.js';
import { Dispatcher } from '../src/events/dispatcher.js';
import { MAX_IN_FLIGHT } from '../src/events/lane.js';
import { publicOnlyLookup, Sender } from '../src/events/send.js';
import { buildApp } from '../src/app.js';
import { callAs, collectingStream, teamWithKey, testConfig, until, watchForCrashes, type TestTeam } from './helpers.js';
import { manage, managementKey, type Management } from './management-helpers.js';
import { nameServer, privateDatabase, receiver, seeded, verified, type Answer, type Delivery, type PrivateDatabase, type Receiver } from './webhook-helpers.js';

const RETRIES = 20;
const ENV = {
  WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT: '1s', WEBHOOK_RETRY_SCHEDULE: Array.from({ length: RETRIES }, () => '10ms').join(','),
};
const HANG_MS = 60_000;
const MSG_ID = /^msg_[0-9a-f]{32}$/;

describe('webhook delivery', () => {
  let pg: PrivateDatabase;
  let db: Database;
  let sql: Sql;
  let app: App;
  let dispatcher: Dispatcher;
  let m: Management;
  const log = collectingStream();
  const receivers: Receiver[] = [];
  const secrets: string[] = [];
  const headerValues: string[] = [];
  let crashes: ReturnType<typeof watchForCrashes>;

  const newDispatcher = (env: Record<string, string> = {}) => {
    const config = testConfig({ DATABASE_URL: pg.url, ...ENV, ...env });
    return new Dispatcher(sql, {
      timeoutMs: config.webhookTimeoutMs, retryScheduleMs: config.webhookRetryScheduleMs, disableAfterMs: config.webhookDisableAfterMs,
      allowPrivate: config.webhookAllowPrivate, log: pino({ level: 'info' }, log.stream),
    });
  };

  before(async () => {
    crashes = watchForCrashes();
    pg = await privateDatabase('webhooks');
    const config = testConfig({ DATABASE_URL: pg.url, ...ENV });
    db = await openDatabase(config, () => {}, 'hds-webhooks');
    sql = db.sql;
    app = await buildApp({ config, sql, logger: false });
    dispatcher = newDispatcher();
    await dispatcher.start();
    m = await managementKey(sql);
  });
  after(async () => {
    await dispatcher?.stop(1000);
    await app?.close();
    for (const r of receivers) await r.close();
    await db?.close();
    await pg?.stop();
    crashes.assertNone();
  });

  interface Setup { team: TestTeam; webhookId: string; secret: string; inbox: Receiver; base: string }

  /** A team with one endpoint on a new receiver. */
  async function endpointFor(answer?: (d: Delivery) => Answer | Promise<Answer>, fields: object = {}, team?: TestTeam): Promise<Setup> {
    const owner = team ?? await teamWithKey(sql, 'delivery');
    const inbox = await receiver(answer);
    receivers.push(inbox);
    const base = `${m.base}/team/${owner.teamId}/production/webhook`;
    const res = await manage(app, m.key, 'POST', base, { url: inbox.url, ...fields });
    assert.equal(res.statusCode, 200, res.body);
    const webhookId = res.json().id as string;
    const secret = (await manage(app, m.key, 'GET', `${base}/${webhookId}/secret`)).json().key as string;
    secrets.push(secret);
    return { team: owner, webhookId, secret, inbox, base: `${base}/${webhookId}` };
  }
  const createUser = async (team: TestTeam) => {
    const res = await callAs(app, team.key, 'POST', '/v2/user/', { client_user_id: `wh-${randomUUID()}` });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { user_id: string; client_user_id: string };
  };
  const messages = async (s: Setup, query = '') => {
    const res = await manage(app, m.key, 'GET', `${s.base}/messages${query}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { data: Record<string, any>[]; next_cursor: string | null };
  };

  it('delivers a change to the team\'s endpoint, signed, with both header families and the custom headers', async () => {
    const s = await endpointFor();
    headerValues.push('Bearer s3cr3t-bearer-value', 'custom-value-7');
    assert.equal((await manage(app, m.key, 'PUT', `${s.base}/headers`, { headers: { Authorization: 'Bearer s3cr3t-bearer-value', 'x-team': 'custom-value-7' } })).statusCode, 204);
    const user = await createUser(s.team);
    const [delivery] = await until('the delivery', HANG_MS, () => s.inbox.deliveries.length > 0 && s.inbox.deliveries);
    const h = delivery!.headers;
    assert.match(String(h['webhook-id']), MSG_ID);
    for (const name of ['id', 'timestamp', 'signature']) assert.equal(h[`svix-${name}`], h[`webhook-${name}`], name);
    assert.match(String(h['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
    assert.ok(Math.abs(Number(h['webhook-timestamp']) - Date.now() / 1000) < 300);
    assert.equal(h['content-type'], 'application/json');
    assert.equal(h.authorization, 'Bearer s3cr3t-bearer-value');
    assert.equal(h['x-team'], 'custom-value-7');
    const event = verified(s.secret, delivery!);
    const stored = (await callAs(app, s.team.key, 'GET', `/v2/user/${user.user_id}`)).json();
    assert.deepEqual(event, { event_type: 'user.created', data: stored, user_id: user.user_id, client_user_id: user.client_user_id, team_id: s.team.teamId });
    await until('delivered in the messages list', HANG_MS, async () => (await messages(s)).data[0]?.status === 'delivered');
    const [message] = (await messages(s)).data;
    assert.deepEqual(Object.keys(message!), ['id', 'event_type', 'created_at', 'status', 'attempts', 'last_attempt_at', 'last_status_code']);
    assert.deepEqual([message!.id, message!.event_type, message!.attempts, message!.last_status_code], [h['webhook-id'], 'user.created', 1, 204]);
  });

  it('sends each event to every enabled endpoint whose filter_types take it, with the same webhook-id', async () => {
    const all = await endpointFor();
    const deletions = await endpointFor(undefined, { filter_types: ['user.deleted', 'provider.connection.created'] }, all.team);
    const user = await createUser(all.team);
    assert.equal((await callAs(app, all.team.key, 'POST', '/v2/link/connect/demo', { user_id: user.user_id, provider: 'oura' })).statusCode, 200);
    assert.equal((await callAs(app, all.team.key, 'DELETE', `/v2/user/${user.user_id}`)).statusCode, 200);
    const types = (s: Setup) => s.inbox.deliveries.map((d) => verified(s.secret, d).event_type).sort();
    await until('four deliveries to the first endpoint', HANG_MS, () => all.inbox.delivered().size === 4);
    await until('two deliveries to the second', HANG_MS, () => deletions.inbox.delivered().size === 2);
    assert.deepEqual(types(all), ['provider.connection.created', 'provider.connection.deleted', 'user.created', 'user.deleted']);
    assert.deepEqual(types(deletions), ['provider.connection.created', 'user.deleted']);
    const idOf = (s: Setup, type: string) => s.inbox.deliveries.find((d) => verified(s.secret, d).event_type === type)!.headers['webhook-id'];
    assert.equal(idOf(all, 'user.deleted'), idOf(deletions, 'user.deleted'));
  });

  it('signs with both secrets during a rotation\'s overlap: each verifies alone', async () => {
    const s = await endpointFor();
    assert.equal((await manage(app, m.key, 'POST', `${s.base}/secret/rotate`)).statusCode, 204);
    const current = (await manage(app, m.key, 'GET', `${s.base}/secret`)).json().key as string;
    secrets.push(current);
    await createUser(s.team);
    const [delivery] = await until('the delivery', HANG_MS, () => s.inbox.deliveries.length > 0 && s.inbox.deliveries);
    assert.equal(String(delivery!.headers['webhook-signature']).split(' ').length, 2);
    assert.equal(verified(s.secret, delivery!).event_type, 'user.created', 'the old secret');
    assert.equal(verified(current, delivery!).event_type, 'user.created', 'the new one');
  });

  it('retries a failed attempt (3xx, 5xx, no answer) with the same webhook-id, then fails it; recover sends it again', async () => {
    let answer: Answer[] = [302, 500, 'drop', 503];
    const s = await endpointFor((d) => (d.headers['webhook-id'] ? answer[s.inbox.deliveries.indexOf(d) % answer.length]! : 204));
    await createUser(s.team);
    await until('the message fails', HANG_MS, async () => (await messages(s, '?status=failed')).data.length === 1);
    assert.equal(s.inbox.deliveries.length, 1 + RETRIES, 'the first attempt and every retry');
    assert.equal(new Set(s.inbox.deliveries.map((d) => d.headers['webhook-id'])).size, 1, 'one webhook-id');
    assert.ok(s.inbox.deliveries.every((d) => d.headers['webhook-id'] && verified(s.secret, d)));
    const [failed] = (await messages(s, '?status=failed')).data;
    assert.equal(failed!.attempts, 1 + RETRIES);
    assert.ok([302, 500, 503, null].includes(failed!.last_status_code));
    assert.deepEqual((await messages(s, '?status=pending')).data, []);
    assert.deepEqual((await messages(s, '?status=delivered')).data, []);

    answer = [200];
    const recover = await manage(app, m.key, 'POST', `${s.base}/recover`, { since: new Date(Date.now() - 3_600_000).toISOString() });
    assert.equal(recover.statusCode, 202, recover.body);
    await until('delivered after recover', HANG_MS, async () => (await messages(s, '?status=delivered')).data.length === 1);
    assert.equal(s.inbox.delivered().size, 1);
    assert.equal([...s.inbox.delivered().keys()][0], failed!.id, 'the same webhook-id');
    const [delivered] = (await messages(s)).data;
    assert.deepEqual([delivered!.attempts, delivered!.last_status_code], [1, 200], 'its schedule started anew');
  });

  it('waits each retry\'s delay of WEBHOOK_RETRY_SCHEDULE from the failure before it', async () => {
    // This file's dispatcher retries after 10 ms: one with longer delays takes its place for this test.
    await dispatcher.stop(1000);
    const slow = newDispatcher({ WEBHOOK_RETRY_SCHEDULE: '300ms,600ms' });
    await slow.start();
    try {
      const s = await endpointFor(() => 500);
      await createUser(s.team);
      await until('the message fails', HANG_MS, async () => (await messages(s, '?status=failed')).data.length === 1);
      const at = s.inbox.deliveries.map((d) => d.at);
      assert.equal(at.length, 3, 'the first attempt and the schedule\'s two retries');
      // Lower bounds only: a slow machine waits longer, never less.
      assert.ok(at[1]! - at[0]! >= 300, `first retry ${at[1]! - at[0]!} ms after the attempt`);
      assert.ok(at[2]! - at[1]! >= 600, `second retry ${at[2]! - at[1]!} ms after the first`);
    } finally {
      await slow.stop(1000);
      dispatcher = newDispatcher();
      await dispatcher.start();
    }
  });

  it('a 410 disables the endpoint at once; then its team\'s events make no messages for it', async () => {
    const s = await endpointFor(() => 410);
    await createUser(s.team);
    await until('the endpoint is disabled', HANG_MS, async () => (await manage(app, m.key, 'GET', s.base)).json().disabled === true);
    assert.equal(s.inbox.deliveries.length, 1, 'never retried');
    assert.deepEqual((await messages(s)).data.map((x) => [x.status, x.last_status_code]), [['failed', 410]]);
    await createUser(s.team);
    assert.equal((await messages(s)).data.length, 1);
    assert.ok(log.lines().some((l) => l.msg === 'webhook endpoint disabled' && l.endpoint_id === s.webhookId));
  });

  it('an endpoint whose every attempt has failed for WEBHOOK_DISABLE_AFTER is disabled; a success ends the streak', async () => {
    let failing = true;
    const s = await endpointFor(() => (failing ? 500 : 204));
    await createUser(s.team);
    await until('a failed attempt starts the streak', HANG_MS, async () =>
      (await sql`SELECT 1 FROM webhook_endpoints WHERE endpoint_id = ${s.webhookId} AND failing_since IS NOT NULL`).length === 1);
    failing = false;
    await until('a delivery ends it', HANG_MS, async () =>
      (await sql`SELECT 1 FROM webhook_endpoints WHERE endpoint_id = ${s.webhookId} AND failing_since IS NULL`).length === 1);
    assert.equal((await manage(app, m.key, 'GET', s.base)).json().disabled, false);
    failing = true;
    // Failing for six days already (the default WEBHOOK_DISABLE_AFTER is 5d).
    await sql`UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE endpoint_id = ${s.webhookId}`;
    await createUser(s.team);
    await until('the endpoint is disabled', HANG_MS, async () => (await manage(app, m.key, 'GET', s.base)).json().disabled === true);
    // Enabled again, its streak starts anew: a failed attempt does not disable it at once.
    assert.equal((await manage(app, m.key, 'PATCH', s.base, { disabled: false })).statusCode, 200);
    const [streak] = await sql<{ failing_since: Date | null }[]>`SELECT failing_since FROM webhook_endpoints WHERE endpoint_id = ${s.webhookId}`;
    assert.equal(streak!.failing_since, null);
    const user = await createUser(s.team);
    // The outcome and the endpoint's streak are written by one statement (claims.ts, recordOutcomes).
    await until('an attempt for the new user failed, or the endpoint is disabled', HANG_MS, async () => (await sql`
      SELECT 1 FROM webhook_messages m JOIN events e USING (event_id)
      WHERE m.endpoint_id = ${s.webhookId} AND e.user_id = ${user.user_id} AND m.attempts >= 1 AND m.last_status_code = 500
      UNION ALL SELECT 1 FROM webhook_endpoints WHERE endpoint_id = ${s.webhookId} AND disabled`).length > 0);
    assert.equal((await manage(app, m.key, 'GET', s.base)).json().disabled, false);
    await manage(app, m.key, 'PATCH', s.base, { disabled: true });
  });

  it('a dead endpoint never delays another: every event reaches the live one while the dead one holds its attempts', async () => {
    const dead = await endpointFor(() => 'hang');
    const live = await endpointFor(undefined, {}, dead.team);
    const users = [];
    for (let i = 0; i < 40; i++) users.push(await createUser(dead.team));
    await until('every event at the live endpoint', HANG_MS, () => live.inbox.delivered().size === 40);
    assert.ok(dead.inbox.deliveries.every((d) => d.status === undefined), 'the dead endpoint answered nothing');
    // Its attempts time out (WEBHOOK_TIMEOUT 1s): failed attempts, retried.
    await until('a timed-out attempt is recorded', HANG_MS, async () =>
      (await messages(dead)).data.some((x) => x.attempts >= 1 && x.last_attempt_at !== null && x.last_status_code === null && x.status === 'pending'));
    assert.ok(log.lines().some((l) => l.msg === 'webhook attempt failed' && l.endpoint_id === dead.webhookId && l.error === 'ETIMEDOUT'));
    await manage(app, m.key, 'PATCH', dead.base, { disabled: true });
  });

  it('counts the pending messages of a disabled endpoint as held, outside the oldest pending age', async () => {
    const s = await endpointFor(() => 'hang');
    await createUser(s.team);
    await until('the attempt is open', HANG_MS, () => s.inbox.open() === 1);
    await manage(app, m.key, 'PATCH', s.base, { disabled: true });
    await sql`UPDATE webhook_messages SET created_at = now() - interval '1 day' WHERE endpoint_id = ${s.webhookId}`;
    const now = await backlog(sql);
    assert.ok(now.held >= 1, `held ${now.held}`);
    assert.ok(now.oldestPendingSeconds < 86_000, `the oldest pending is ${now.oldestPendingSeconds} s old`);
  });

  it('honours rate_limit (messages per second)', async () => {
    const s = await endpointFor(undefined, { rate_limit: 5 });
    const startedAt = Date.now();
    for (let i = 0; i < 15; i++) await createUser(s.team);
    await until('every event delivered', HANG_MS, () => s.inbox.delivered().size === 15);
    assert.equal(s.inbox.deliveries.length, 15);
    // At most 5 are claimed in each second of the database's clock: 15 take three seconds, so the last is claimed two seconds after the
    // start of the first one's second, more than a second after the first create. A bound below, which no slowness can break.
    const last = Math.max(...s.inbox.deliveries.map((d) => d.at));
    assert.ok(last - startedAt > 1000, `15 messages at 5/s in ${last - startedAt} ms`);
    const [row] = await sql<{ rate_used: number }[]>`SELECT rate_used FROM webhook_endpoints WHERE endpoint_id = ${s.webhookId}`;
    assert.ok(row!.rate_used >= 1 && row!.rate_used <= 5, `${row!.rate_used} claimed in the last second`);
  });

  it('with two dispatchers, each attempt is made once', async () => {
    const second = newDispatcher();
    await second.start();
    try {
      const s = await endpointFor();
      for (let i = 0; i < 60; i++) await createUser(s.team);
      await until('every event delivered', HANG_MS, async () => (await messages(s, '?status=delivered&limit=250')).data.length === 60);
      assert.equal(s.inbox.deliveries.length, 60);
      assert.equal(new Set(s.inbox.deliveries.map((d) => d.headers['webhook-id'])).size, 60);
      assert.ok((await messages(s, '?limit=250')).data.every((x) => x.attempts === 1));
    } finally {
      await second.stop(1000);
    }
  });

  it('an endpoint that fails at random still receives every event', async () => {
    const random = seeded(29);
    const s = await endpointFor(() => {
      const r = random();
      return r < 0.2 ? 500 : r < 0.3 ? 'drop' : r < 0.4 ? 302 : 200;
    });
    const users = [];
    for (let i = 0; i < 40; i++) users.push(await createUser(s.team));
    for (const u of users.slice(0, 20)) {
      assert.equal((await callAs(app, s.team.key, 'PATCH', `/v2/user/${u.user_id}`, { fallback_time_zone: 'Europe/Paris' })).statusCode, 204);
    }
    for (const u of users.slice(20, 30)) assert.equal((await callAs(app, s.team.key, 'DELETE', `/v2/user/${u.user_id}`)).statusCode, 200);
    const expected = await sql<{ event_id: string }[]>`SELECT event_id FROM events WHERE team_id = ${s.team.teamId}`;
    assert.equal(expected.length, 70);
    const ids = expected.map((e) => `msg_${e.event_id.replaceAll('-', '')}`);
    await until('every event delivered', HANG_MS, () => ids.every((id) => s.inbox.delivered().has(id)));
    assert.ok(s.inbox.deliveries.length > 70, 'some attempts failed');
    for (const d of s.inbox.delivered().values()) verified(s.secret, d);
    await until('every message delivered', HANG_MS, async () => (await messages(s, '?status=delivered&limit=250')).data.length === 70);
  });

  it('checks the private-address rule at each delivery unless WEBHOOK_ALLOW_PRIVATE', async () => {
    const inbox = await receiver();
    receivers.push(inbox);
    const port = new URL(inbox.url).port;
    const strict = new Sender({ timeoutMs: 5000, allowPrivate: false });
    try {
      assert.deepEqual(await strict.send(inbox.url, {}, '{}'), { status: null, error: 'EINSECUREURL' });
      assert.deepEqual(await strict.send(`https://127.0.0.1:${port}/`, {}, '{}'), { status: null, error: 'EINTERNALADDRESS' });
      assert.deepEqual(await strict.send(`https://[::ffff:127.0.0.1]:${port}/`, {}, '{}'), { status: null, error: 'EINTERNALADDRESS' });
      assert.deepEqual(await strict.send(`https://localhost:${port}/`, {}, '{}'), { status: null, error: 'EINTERNALADDRESS' }, 'a name is checked as it resolves');
      assert.equal(inbox.deliveries.length, 0, 'nothing reached the receiver');
    } finally {
      strict.close();
    }
    const open = new Sender({ timeoutMs: 5000, allowPrivate: true });
    try {
      assert.deepEqual(await open.send(inbox.url, {}, '{}'), { status: 204 });
    } finally {
      open.close();
    }
  });

  it('a hanging endpoint does not hold the connections of another on the same host and port', async () => {
    // Every lane sends through one Sender: a hanging endpoint's lane keeps MAX_IN_FLIGHT attempts open.
    const inbox = await receiver((d) => (d.path === '/dead' ? 'hang' : 204));
    receivers.push(inbox);
    const sender = new Sender({ timeoutMs: HANG_MS, allowPrivate: true });
    try {
      let settled = 0;
      const hanging = Array.from({ length: MAX_IN_FLIGHT }, () => sender.send(inbox.url.replace(/\/hook$/, '/dead'), {}, '{}').finally(() => settled++));
      await until('the dead endpoint holds a lane\'s attempts', HANG_MS, () => inbox.open() === MAX_IN_FLIGHT);
      assert.deepEqual(await sender.send(inbox.url, {}, '{}'), { status: 204 }, 'answered while the other path hangs');
      assert.equal(settled, 0, 'the hanging attempts are still open');
      sender.close();
      await Promise.all(hanging);
    } finally {
      sender.close();
    }
  });

  it('resolves an endpoint\'s name while another\'s name server hangs, and refuses a name of an internal address', async () => {
    // The connection's lookup when private addresses are not allowed; no connection is made here.
    const server = await nameServer({ 'public.example': '8.8.8.8', 'inside.example': '10.1.2.3' });
    const servers = dns.promises.getServers();
    dns.promises.setServers([server.address]);
    const lookup = (name: string) => new Promise<unknown>((resolve) => {
      publicOnlyLookup(name, { all: true }, (err: NodeJS.ErrnoException | null, addresses: unknown) => resolve(err ? err.code : addresses));
    });
    try {
      const hanging = Array.from({ length: 2 * MAX_IN_FLIGHT }, () => lookup('hung.example'));
      await until('the hung name is asked', HANG_MS, () => server.held() >= 1);
      assert.deepEqual(await lookup('public.example'), [{ address: '8.8.8.8', family: 4 }]);
      assert.ok(server.held() >= 1, 'answered while the other name server holds its queries');
      assert.equal(await lookup('inside.example'), 'EINTERNALADDRESS');
      assert.equal(await lookup('api.localhost'), 'EINTERNALADDRESS', 'the loopback, whatever DNS says');
      await server.close();
      // Each lookup ends: no such name now (or, had the machine been slow enough, c-ares gave up on it).
      assert.ok((await Promise.all(hanging)).every((code) => code === 'ENOTFOUND' || code === 'ETIMEOUT'));
    } finally {
      await server.close();
      dns.promises.setServers(servers);
    }
  });

  it('the messages route pages by cursor, filters by status, and answers 404 and 422 as the other lists', async () => {
    const s = await endpointFor();
    for (let i = 0; i < 5; i++) await createUser(s.team);
    await until('all delivered', HANG_MS, async () => (await messages(s, '?status=delivered')).data.length === 5);
    const first = await messages(s, '?limit=2');
    assert.equal(first.data.length, 2);
    const second = await messages(s, `?limit=2&next_cursor=${encodeURIComponent(first.next_cursor!)}`);
    const third = await messages(s, `?limit=2&next_cursor=${encodeURIComponent(second.next_cursor!)}`);
    assert.equal(third.next_cursor, null);
    const ids = [...first.data, ...second.data, ...third.data].map((x) => x.id);
    assert.deepEqual(ids, (await messages(s)).data.map((x) => x.id));
    assert.equal(new Set(ids).size, 5);
    const wrongList = await manage(app, m.key, 'GET', `${s.base}/messages?status=delivered&next_cursor=${encodeURIComponent(first.next_cursor!)}`);
    assert.equal(wrongList.statusCode, 422);
    assert.equal((await manage(app, m.key, 'GET', `${s.base}/messages?status=lost`)).statusCode, 422);
    const other = await teamWithKey(sql, 'delivery other');
    const foreign = `${m.base}/team/${other.teamId}/production/webhook/${s.webhookId}`;
    assert.deepEqual((await manage(app, m.key, 'GET', `${foreign}/messages`)).json(), { detail: 'Webhook endpoint not found' });
    assert.equal((await manage(app, m.key, 'POST', `${foreign}/recover`, { since: new Date().toISOString() })).statusCode, 404);
    assert.equal((await manage(app, m.key, 'POST', `${s.base}/recover`, { since: 'yesterday' })).statusCode, 422);
    assert.equal((await manage(app, m.key, 'DELETE', `${s.base}/messages`)).statusCode, 405);
  });

  it('writes outcomes by primary key, even when the statistics say nothing is pending (a recovered backlog)', async () => {
    // The statistics are taken while the backlog is `failed`; recover makes it pending at once.
    // An outcome statement that let the planner take the claims' index would read the whole
    // backlog for every batch of outcomes (docs/decisions/webhook-delivery-in-postgresql.md).
    const BACKLOG = 3000;
    const s = await endpointFor();
    await sql`
      WITH e AS (
        INSERT INTO events (team_id, user_id, event_type, body)
        SELECT ${s.team.teamId}, gen_random_uuid(), 'user.updated', '{}' FROM generate_series(1, ${BACKLOG})
        RETURNING event_id, created_at)
      INSERT INTO webhook_messages (event_id, endpoint_id, created_at, status, attempts)
      SELECT event_id, ${s.webhookId}, created_at, 'failed', 1 FROM e`;
    await sql`ANALYZE webhook_messages`;
    // Pending, but not due for an hour: the running dispatcher leaves them alone.
    await sql`UPDATE webhook_messages SET status = 'pending', next_attempt_at = now() + interval '1 hour' WHERE endpoint_id = ${s.webhookId}`;
    const picked = await sql<{ event_id: string }[]>`SELECT event_id FROM webhook_messages WHERE endpoint_id = ${s.webhookId} LIMIT 32`;
    const own = connect(pg.url, { max: 1 });
    try {
      const dueIndexReads = async () => {
        await own`SELECT pg_stat_force_next_flush()`;
        const [row] = await own<{ n: string }[]>`SELECT idx_tup_read::text AS n FROM pg_stat_user_indexes WHERE indexrelname = 'webhook_messages_due'`;
        return Number(row!.n);
      };
      const before = await dueIndexReads();
      const at = new Date().toISOString();
      await recordOutcomes(own, s.webhookId, picked.map((p) => ({ event_id: p.event_id, attempts: 1, status: 204, delivered: true, retryInMs: null, at })), 86_400_000);
      const read = (await dueIndexReads()) - before;
      assert.ok(read < BACKLOG / 10, `the outcome statement read ${read} entries of the claims' index for 32 outcomes`);
      const [done] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_messages WHERE endpoint_id = ${s.webhookId} AND status = 'delivered'`;
      assert.equal(done!.n, 32);
    } finally {
      await own.end();
      await sql`DELETE FROM webhook_messages WHERE endpoint_id = ${s.webhookId}`;
    }
  });

  it('logs failed attempts with the endpoint\'s id and the status, never a secret, a header value or a URL', async () => {
    const lines = log.lines();
    const failed = lines.filter((l) => l.msg === 'webhook attempt failed');
    assert.ok(failed.length > 0);
    for (const l of failed) assert.ok(typeof l.endpoint_id === 'string' && 'status' in l && typeof l.webhook_id === 'string');
    const text = JSON.stringify(lines);
    for (const value of [...secrets, ...headerValues, '127.0.0.1']) assert.ok(!text.includes(value), 'a secret, header value or URL in the log');
  });
});

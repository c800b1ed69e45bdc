/**
 * Webhook delivery on its own thread (src/events/delivery-thread.ts), as the
 * server runs it, on a PostgreSQL of this file's own: the thread delivers,
 * its counts show in this thread's /metrics registry, its log lines come
 * here (a failed attempt with the endpoint's id and status, never the secret
 * or a header value), its sessions stay within its pool; a thread that dies
 * is told and started again, and delivers on; stop() ends it and its
 * sessions.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildApp, type App } from '../src/app.js';
import type { Config } from '../src/config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { DELIVERY_POOL_MAX, DeliveryThread } from '../src/events/delivery-thread.js';
import { registerDeliveryMetrics } from '../src/events/metrics.js';
import { findCurrentSecret, replaceWebhookHeaders } from '../src/management/webhook-store.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { callAs, teamWithKey, testConfig, until, watchForCrashes, type TestTeam } from './helpers.js';
import { privateDatabase, receiver, verified, type PrivateDatabase, type Receiver } from './webhook-helpers.js';

const HANG_MS = 60_000;
/** The thread's sessions under a name of their own here (the server gives them its own), so that they can be counted. */
const THREAD_APP = 'hds-test-delivery-thread';
const HEADER_VALUE = 'thread-header-value-5f1c';

describe('webhook delivery on its own thread', () => {
  let pg: PrivateDatabase;
  let db: Database;
  let config: Config;
  let app: App;
  let team: TestTeam;
  let inbox: Receiver;
  let secret: string;
  let thread: DeliveryThread;
  const registry = new Registry();
  const logLines: string[] = [];
  const told: { level: string; fields: object; msg: string }[] = [];
  let crashes: ReturnType<typeof watchForCrashes>;
  /** webhook-ids answered 500 once already: each id's first attempt fails, its retry succeeds. */
  const failedOnce = new Set<string>();

  before(async () => {
    crashes = watchForCrashes();
    pg = await privateDatabase('delivery-thread');
    config = testConfig({
      DATABASE_URL: pg.url, LOG_LEVEL: 'info', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT: '1s',
      WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 20 }, () => '10ms').join(','),
    });
    db = await openDatabase(config, () => {}, 'hds-test-delivery-main');
    app = await buildApp({ config, sql: db.sql, logger: false });
    team = await teamWithKey(db.sql, 'thread');
    inbox = await receiver((d) => {
      const id = String(d.headers['webhook-id']);
      if (failedOnce.has(id)) return 204;
      failedOnce.add(id);
      return 500;
    });
    const saved = await registerWebhook(db.sql, team.teamId, { url: inbox.url }, { allowPrivate: true });
    assert.ok(typeof saved === 'object' && 'webhook' in saved);
    assert.ok(await replaceWebhookHeaders(db.sql, team.teamId, saved.webhook.id, { 'x-thread': HEADER_VALUE }));
    secret = (await findCurrentSecret(db.sql, team.teamId, saved.webhook.id))!;
    thread = await DeliveryThread.start({
      url: db.url, config, applicationName: THREAD_APP, writeLog: (line) => logLines.push(line),
      log: {
        error: (fields, msg) => told.push({ level: 'error', fields, msg }),
        warn: (fields, msg) => told.push({ level: 'warn', fields, msg }),
      },
    });
    registerDeliveryMetrics(registry, db.sql, thread.stats);
  });
  after(async () => {
    await thread?.stop(1000);
    await app?.close();
    await inbox?.close();
    await db?.close();
    await pg?.stop();
    crashes.assertNone();
  });

  const createUser = async () => {
    const res = await callAs(app, team.key, 'POST', '/v2/user/', { client_user_id: `thread-${randomUUID()}` });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { user_id: string };
  };
  const deliveredTo = (userId: string) => [...inbox.delivered().values()].some((d) => verified(secret, d).user_id === userId);
  const metric = async (outcome: string) => {
    const text = await registry.metrics();
    return Number(new RegExp(`^hds_webhook_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
  };
  const sessions = async () => (await db.sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${THREAD_APP}`)[0]!.n;

  it('delivers, counts where /metrics reads, and logs a failed attempt without the secret or a header value', async () => {
    const user = await createUser();
    await until('the delivery, after one failed attempt', HANG_MS, () => deliveredTo(user.user_id));
    assert.equal(inbox.deliveries.at(-1)!.headers['x-thread'], HEADER_VALUE);
    await until('the counts on this thread', HANG_MS, async () => (await metric('delivered')) >= 1 && (await metric('retried')) >= 1);
    assert.equal(thread.stats.delivered, await metric('delivered'));

    const failed = await until('the failed attempt in the log', HANG_MS, () =>
      logLines.map((l) => JSON.parse(l) as Record<string, any>).find((l) => l.msg === 'webhook attempt failed'));
    assert.equal(failed.status, 500);
    assert.equal(typeof failed.endpoint_id, 'string');
    assert.equal(failed.level, 40, 'a warning, at the process\'s LOG_LEVEL');
    const text = logLines.join('');
    assert.ok(!text.includes(secret) && !text.includes(secret.replace(/^whsec_/, '')), 'the secret reached the log');
    assert.ok(!text.includes(HEADER_VALUE), 'a header value reached the log');
    assert.ok(!text.includes(inbox.url), 'the endpoint\'s URL reached the log');
  });

  it('keeps within its pool: DELIVERY_POOL_MAX and the LISTEN connection', async () => {
    await Promise.all(Array.from({ length: 20 }, () => createUser()));
    let most = 0;
    await until('the 20 deliveries', HANG_MS, async () => {
      most = Math.max(most, await sessions());
      return inbox.delivered().size >= 21;
    });
    assert.ok(most >= 1 && most <= DELIVERY_POOL_MAX + 1, `${most} sessions`);
  });

  it('tells of a thread that died, starts it again, and delivers on with the counts kept', async () => {
    const deliveredBefore = thread.stats.delivered;
    const worker = (thread as unknown as { worker: Worker }).worker;
    await worker.terminate();
    await until('the death told', HANG_MS, () => told.find((t) => t.level === 'error' && /webhook delivery thread died/.test(t.msg)));
    await until('a new thread', HANG_MS, () => {
      const next = (thread as unknown as { worker?: Worker }).worker;
      return next !== undefined && next !== worker;
    });
    const user = await createUser();
    await until('a delivery by the new thread', HANG_MS, () => deliveredTo(user.user_id));
    await until('the counts go on from where they were', HANG_MS, () => thread.stats.delivered >= deliveredBefore + 1);
  });

  it('stops: ends the thread and its sessions', async () => {
    await until('the thread has sessions', HANG_MS, async () => (await sessions()) > 0);
    await thread.stop(1000);
    assert.equal((thread as unknown as { worker?: Worker }).worker, undefined, 'the thread ended');
    await until('the thread\'s sessions gone', HANG_MS, async () => (await sessions()) === 0);
    assert.ok(!told.some((t) => /did not stop in time/.test(t.msg)));
  });
});

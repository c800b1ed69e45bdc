/**
 * Nothing lost (contract section 10): the service is killed with SIGKILL
 * while clients change users and deliveries are in flight; started again,
 * it delivers every event of every change that was answered 2xx, signed
 * (verified with `svix`), to a receiver on the loopback. The service runs as
 * its own process on a PostgreSQL of this file's own, which outlives it.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect, type Sql } from '../src/db/client.js';
import { freePort } from '../src/db/free-port.js';
import { migrate } from '../src/db/migrate.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { findCurrentSecret } from '../src/management/webhook-store.js';
import { NO_RATE_LIMITS, ROOT, teamWithKey, until, type TestTeam } from './helpers.js';
import { privateDatabase, receiver, seeded, verified, type PrivateDatabase, type Receiver } from './webhook-helpers.js';

const HANG_MS = 120_000;

interface Server { child: ChildProcess; output: () => string; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> }

function startServer(databaseUrl: string, port: number): Server {
  const env: NodeJS.ProcessEnv = {
    ...process.env, ...NO_RATE_LIMITS, DATABASE_URL: databaseUrl, PORT: String(port), HOST: '127.0.0.1', METRICS_PORT: '0',
    LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT: '1s',
    WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 20 }, () => '10ms').join(','), SHUTDOWN_GRACE_MS: '4000',
  };
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'server.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => output, exited };
}

describe('webhook delivery through a SIGKILL', () => {
  let pg: PrivateDatabase;
  let sql: Sql;
  let team: TestTeam;
  let inbox: Receiver;
  let secret: string;
  let server: Server | undefined;
  const random = seeded(2029);
  /** While true the receiver answers nothing: a delivery it holds is surely not recorded as delivered when the kill comes. */
  let holding = false;
  /** Deliveries the receiver left unanswered because they came while `holding`. */
  let held = 0;

  before(async () => {
    pg = await privateDatabase('webhook-kill');
    sql = connect(pg.url, { max: 3 });
    await migrate(sql);
    team = await teamWithKey(sql, 'kill');
    // Each delivery is answered after a few ms; while `holding`, not at all.
    inbox = await receiver(() => {
      if (holding) {
        held++;
        return 'hang';
      }
      return new Promise((resolve) => setTimeout(() => resolve(200), Math.floor(random() * 20)));
    });
    const saved = await registerWebhook(sql, team.teamId, { url: inbox.url }, { allowPrivate: true });
    assert.ok(typeof saved === 'object' && 'webhook' in saved);
    secret = (await findCurrentSecret(sql, team.teamId, saved.webhook.id))!;
  });
  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    await inbox?.close();
    await sql?.end();
    await pg?.stop();
  });

  it('delivers every event of every change answered 2xx, after a kill and a restart', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const answers = async () => {
      try {
        return (await fetch(`${base}/v2/user/?limit=1`, { headers: { 'x-service-api-key': team.key } })).status === 200;
      } catch {
        return false;
      }
    };
    server = startServer(pg.url, port);
    await until('the service answers', HANG_MS, answers);

    /** Events of changes answered 2xx: `type/user_id` → how many. */
    const expected = new Map<string, number>();
    const expect = (type: string, userId: string) => expected.set(`${type}/${userId}`, (expected.get(`${type}/${userId}`) ?? 0) + 1);
    let running = true;
    let answered = 0;
    const send = async (method: string, url: string, body?: object) => {
      try {
        const res = await fetch(base + url, {
          method, headers: { 'x-service-api-key': team.key, ...(body ? { 'content-type': 'application/json' } : {}) },
          ...(body ? { body: JSON.stringify(body) } : {}), signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        if (res.status >= 300) return undefined;
        answered++;
        return text;
      } catch {
        return undefined;
      }
    };
    const client = async (n: number) => {
      for (let i = 0; running; i++) {
        const created = await send('POST', '/v2/user/', { client_user_id: `kill-${n}-${i}-${Date.now()}` });
        if (created === undefined) continue;
        const userId = (JSON.parse(created) as { user_id: string }).user_id;
        expect('user.created', userId);
        if (await send('PATCH', `/v2/user/${userId}`, { fallback_time_zone: 'Europe/Paris' }) !== undefined) expect('user.updated', userId);
        if (await send('POST', '/v2/link/connect/demo', { user_id: userId, provider: 'oura' }) === undefined) continue;
        expect('provider.connection.created', userId);
        if (await send('DELETE', `/v2/user/${userId}`) === undefined) continue;
        expect('provider.connection.deleted', userId);
        expect('user.deleted', userId);
        if (await send('POST', `/v2/user/undo_delete?user_id=${userId}`) !== undefined) expect('user.restored', userId);
      }
    };
    const clients = Promise.all([0, 1, 2, 3].map(client));
    try {
      // Killed while changes are answered and a delivery is held by the receiver, unanswered. Counted
      // where it is held: a request still waiting for its few ms when holding starts is answered 200.
      await until('changes answered and deliveries made', HANG_MS, () => answered >= 60 && inbox.delivered().size >= 30);
      holding = true;
      await until('a delivery held', HANG_MS, () => held > 0);
      server.child.kill('SIGKILL');
      assert.equal((await server.exited).signal, 'SIGKILL');
    } finally {
      running = false;
      await clients;
    }
    // Requests that reached the receiver before the restart: the ones held at the kill must come again after it.
    const beforeRestart = inbox.deliveries.length;
    holding = false;

    server = startServer(pg.url, port);
    await until('the service answers again', HANG_MS, answers);
    const received = () => {
      const counts = new Map<string, Set<string>>();
      for (const [id, delivery] of inbox.delivered()) {
        const event = verified(secret, delivery);
        const key = `${event.event_type}/${event.user_id}`;
        counts.set(key, (counts.get(key) ?? new Set()).add(id));
      }
      return counts;
    };
    const missing = () => [...expected].filter(([key, n]) => (received().get(key)?.size ?? 0) < n);
    await until('every event of every change answered 2xx is delivered', HANG_MS, () => missing().length === 0);
    assert.ok(expected.size > 0 && inbox.deliveries.length > beforeRestart, `${beforeRestart} requests before the restart, ${inbox.deliveries.length} after`);
    await until('no message is left pending', HANG_MS, async () =>
      (await sql`SELECT 1 FROM webhook_messages WHERE status <> 'delivered'`).length === 0);

    // /metrics: this process's attempts by outcome, the backlog by state, the oldest pending message's age.
    const metricsUrl = /metrics on (http:\/\/\S+\/metrics)/.exec(server.output())![1]!;
    const metrics = await until('the delivery on /metrics', HANG_MS, async () => {
      const text = await (await fetch(metricsUrl)).text();
      return /^hds_webhook_messages\{state="pending"\} 0$/m.test(text) && text;
    });
    assert.match(metrics, /^hds_webhook_attempts_total\{outcome="delivered"\} [1-9]\d*$/m);
    assert.match(metrics, /^hds_webhook_messages\{state="failed"\} 0$/m);
    assert.match(metrics, /^hds_webhook_messages\{state="held"\} 0$/m);
    assert.match(metrics, /^hds_webhook_oldest_pending_seconds 0$/m);

    server.child.kill('SIGTERM');
    const { code } = await server.exited;
    assert.equal(code, 0, server.output());
  });
});

/**
 * Database outage under load: a private embedded PostgreSQL is stopped while
 * clients keep calling a listening app, then started again on the same port.
 * Within a second every answer is a 503 with Retry-After, nothing hangs, the
 * process keeps serving, and answers return to 200 without a restart.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';
import { teamWithUsers, type TestTeam } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer { startedAt: number; ms: number; status: number; retryAfter: string | null; body: string }

describe('database outage', () => {
  let dir: string;
  let pg: EmbeddedPostgres;
  let pgPort: number;
  let db: Database;
  let app: App;
  let base: string;
  let team: TestTeam & { users: Record<string, any>[] };
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);

  before(async () => {
    // Under /tmp and world-traversable: PostgreSQL runs as the postgres user when we are root.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-outage-'));
    fs.chmodSync(dir, 0o755);
    pg = await startEmbeddedPostgres(dir);
    pgPort = Number(new URL(pg.url).port);
    const config = loadConfig({ DATABASE_URL: pg.url, LOG_LEVEL: 'silent' });
    db = await openDatabase(config, () => {}, 'hds-outage');
    team = await teamWithUsers(db.sql, 20);
    app = await buildApp({ config, sql: db.sql, logger: false });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
    process.on('unhandledRejection', onUnhandled);
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await app?.close();
    await db?.close();
    await pg?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Four clients calling list and get in a loop until `stop()`; every answer is recorded. */
  function load() {
    const answers: Answer[] = [];
    let running = true;
    const client = async (n: number) => {
      for (let i = 0; running; i++) {
        const url = (n + i) % 2 === 0 ? '/v2/user/?limit=5' : `/v2/user/${team.users[i % team.users.length]!.user_id}`;
        const startedAt = Date.now();
        try {
          const res = await fetch(base + url, { headers: { 'x-service-api-key': team.key }, signal: AbortSignal.timeout(5000) });
          answers.push({ startedAt, ms: Date.now() - startedAt, status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() });
        } catch (err) {
          answers.push({ startedAt, ms: Date.now() - startedAt, status: 0, retryAfter: null, body: String(err) });
        }
        await sleep(5);
      }
    };
    const clients = Promise.all([0, 1, 2, 3].map(client));
    return { answers, stop: async () => { running = false; await clients; } };
  }

  it('answers 503 with Retry-After within a second of the database stopping, and 200 again once it is back', async () => {
    const traffic = load();
    // However an assertion below fails, the load loops must end, or the test process never exits.
    try {
      await outageAndRecovery(traffic);
    } finally {
      await traffic.stop();
    }
  });

  async function outageAndRecovery(traffic: ReturnType<typeof load>) {
    await sleep(500);
    assert.ok(traffic.answers.length > 0 && traffic.answers.every((a) => a.status === 200), 'all 200 before the outage');

    const stoppedAt = Date.now();
    await pg.stop();
    await sleep(2000);
    // The process is up and says so, while the database is down.
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503);

    pg = await startEmbeddedPostgres(dir, () => {}, pgPort);
    const restartedAt = Date.now();
    let backAt: number | undefined;
    while (backAt === undefined) {
      assert.ok(Date.now() - restartedAt < 10_000, 'answers returned to 200 within 10 s of the restart');
      const recent = traffic.answers.filter((a) => a.startedAt > restartedAt).slice(-8);
      if (recent.length === 8 && recent.every((a) => a.status === 200)) backAt = Date.now();
      await sleep(50);
    }
    await traffic.stop();

    const { answers } = traffic;
    const odd = answers.filter((a) => a.status !== 200 && a.status !== 503);
    assert.deepEqual(odd.slice(0, 5), [], 'only 200 and 503, no hang, no reset, no 500');
    const slowest = Math.max(...answers.map((a) => a.ms));
    assert.ok(slowest < 1500, `the slowest answer took ${slowest} ms`);

    const outage = answers.filter((a) => a.startedAt >= stoppedAt + 1000 && a.startedAt + a.ms < restartedAt);
    assert.ok(outage.length >= 20, `${outage.length} requests during the outage`);
    for (const a of outage) {
      assert.equal(a.status, 503);
      assert.equal(a.retryAfter, '1');
      assert.deepEqual(JSON.parse(a.body), { detail: 'Service Unavailable' });
    }
    assert.deepEqual(unhandled, [], 'no unhandled rejection');
    const res = await fetch(`${base}/v2/user/${team.users[0]!.user_id}`, { headers: { 'x-service-api-key': team.key } });
    assert.equal(res.status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
  }
});

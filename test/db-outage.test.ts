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
import { openDatabase, type Database } from '../src/db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';
import { teamWithUsers, testConfig, until, watchForCrashes, type TestTeam } from './helpers.js';

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
  let crashes: ReturnType<typeof watchForCrashes>;

  before(async () => {
    crashes = watchForCrashes();
    // Under /tmp and world-traversable: PostgreSQL runs as the postgres user when we are root.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-outage-'));
    fs.chmodSync(dir, 0o755);
    pg = await startEmbeddedPostgres(dir);
    pgPort = Number(new URL(pg.url).port);
    // The test configuration (silent, rate limits out of reach: four clients in a loop would meet them) on this private database.
    const config = testConfig({ DATABASE_URL: pg.url });
    db = await openDatabase(config, () => {}, 'hds-outage');
    team = await teamWithUsers(db.sql, 20);
    app = await buildApp({ config, sql: db.sql, logger: false });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await app?.close();
    await db?.close();
    await pg?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    // The pools' connections died with the server twice: none of that may be left unhandled.
    crashes.assertNone();
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
        await sleep(5); // pacing, so that four loops do not starve the app they call
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
    await until('answers before the outage', 60_000, () => traffic.answers.length >= 8);
    assert.ok(traffic.answers.every((a) => a.status === 200), 'all 200 before the outage');

    await pg.stop();
    // The database is down from here (stop() returns once PostgreSQL has exited): the second
    // within which answers must turn to 503 starts now, not when the stop was asked for.
    const stoppedAt = Date.now();
    const inOutage = (a: Answer) => a.startedAt >= stoppedAt + 1000;
    await until('20 answers to requests sent more than a second into the outage', 60_000,
      () => traffic.answers.filter(inOutage).length >= 20);
    // The process is up and says so, while the database is down.
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503);

    // The outage ends when the restart begins: PostgreSQL may answer before startEmbeddedPostgres() returns.
    const restartingAt = Date.now();
    pg = await startEmbeddedPostgres(dir, () => {}, pgPort);
    const restartedAt = Date.now();
    await until('answers return to 200 after the restart', 60_000, () => {
      const recent = traffic.answers.filter((a) => a.startedAt > restartedAt).slice(-8);
      return recent.length === 8 && recent.every((a) => a.status === 200);
    });
    await traffic.stop();

    const { answers } = traffic;
    // A request that hung would have been aborted by its client (status 0): no time bound of ours is needed to see it.
    const odd = answers.filter((a) => a.status !== 200 && a.status !== 503);
    assert.deepEqual(odd.slice(0, 5), [], 'only 200 and 503, no hang, no reset, no 500');

    const outage = answers.filter((a) => inOutage(a) && a.startedAt + a.ms < restartingAt);
    assert.ok(outage.length >= 20, `${outage.length} requests during the outage`);
    for (const a of outage) {
      assert.equal(a.status, 503);
      assert.equal(a.retryAfter, '1');
      assert.deepEqual(JSON.parse(a.body), { detail: 'Service Unavailable' });
    }
    const res = await fetch(`${base}/v2/user/${team.users[0]!.user_id}`, { headers: { 'x-service-api-key': team.key } });
    assert.equal(res.status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
  }
});

/**
 * Two service instances on one database behave as one service. Each instance
 * here is its own app with its own pool, as two processes would have. The
 * shared-Redis suite needs a Redis server (HDS_TEST_REDIS_URL, by default
 * 127.0.0.1:6379): without one it is skipped, saying how to get it, except
 * under CI=true, where it fails.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { revokeKey } from '../src/auth/key-store.js';
import { connect, type Sql } from '../src/db/client.js';
import { migrate, migrationFiles } from '../src/db/migrate.js';
import { databaseUrl, NO_RATE_LIMITS, requireRedis, teamWithKey, testApp, testSql, TEST_REDIS_URL, type TestTeam } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const redis = await requireRedis();

interface Instances { sqlA: Sql; sqlB: Sql; appA: App; appB: App }

/** Two apps, each with its own pool as two processes would have, built before a suite's tests and closed after. */
function twoInstances(env: Record<string, string>, use: (instances: Instances) => void): void {
  let instances: Instances | undefined;
  before(async () => {
    const sqlA = testSql();
    const sqlB = testSql();
    instances = { sqlA, sqlB, appA: await testApp(sqlA, env), appB: await testApp(sqlB, env) };
    use(instances);
  });
  after(async () => {
    await Promise.all([instances?.appA.close(), instances?.appB.close()]);
    await Promise.all([instances?.sqlA.end(), instances?.sqlB.end()]);
  });
}

describe('two instances on one database', () => {
  let sqlA: Sql;
  let appA: App;
  let appB: App;

  twoInstances({}, (i) => ({ sqlA, appA, appB } = i));

  const list = (app: App, team: TestTeam) => app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key } });

  it('both see a revoked key refused within one second', async () => {
    const team = await teamWithKey(sqlA);
    // Both instances hold the key in their caches before it is revoked.
    for (const app of [appA, appB]) assert.equal((await list(app, team)).statusCode, 200);
    assert.ok(await revokeKey(sqlA, team.keyId));
    const revokedAt = Date.now();
    // Each instance is asked until it refuses the key. What must hold is that no request sent more
    // than a second after the revocation is accepted: measured by when the last accepted one was
    // sent, not by when the refusal came back (a slow machine answers late, not wrongly).
    await Promise.all([appA, appB].map(async (app) => {
      for (;;) {
        const sentAt = Date.now();
        const status = (await list(app, team)).statusCode;
        if (status === 401) return;
        assert.equal(status, 200);
        assert.ok(sentAt - revokedAt <= 1000, `a request sent ${sentAt - revokedAt} ms after the revocation was accepted`);
        await sleep(10);
      }
    }));
  });

  it('a user created on one instance is readable on the other at once, and its client_user_id is taken on both', async () => {
    const team = await teamWithKey(sqlA);
    const headers = { 'x-service-api-key': team.key };
    const created = await appA.inject({ method: 'POST', url: '/v2/user/', headers, payload: { client_user_id: 'shared-1' } });
    assert.equal(created.statusCode, 200);
    const read = await appB.inject({ url: `/v2/user/${created.json().user_id}`, headers });
    assert.equal(read.statusCode, 200);

    // The same new client_user_id sent to both at once: exactly one creates it.
    const [a, b] = await Promise.all([appA, appB].map((app) =>
      app.inject({ method: 'POST', url: '/v2/user/', headers, payload: { client_user_id: 'shared-2' } })));
    assert.deepEqual([a!.statusCode, b!.statusCode].sort(), [200, 400]);
    const winner = (a!.statusCode === 200 ? a : b)!.json();
    const loser = (a!.statusCode === 400 ? a : b)!.json();
    assert.equal(loser.detail.user_id, winner.user_id);
    assert.equal((await list(appB, team)).json().total, 2);
  });
});

describe('migrations started by several instances at once', () => {
  const name = `hds_migrate_${randomBytes(6).toString('hex')}`;
  let admin: Sql;
  let url: string;

  before(async () => {
    admin = testSql();
    await admin.unsafe(`CREATE DATABASE ${name}`);
    const u = new URL(databaseUrl());
    u.pathname = `/${name}`;
    url = u.toString();
  });
  after(async () => {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  it('applies each migration once on a fresh database', async () => {
    const pools = [connect(url, { max: 1 }), connect(url, { max: 1 }), connect(url, { max: 1 })];
    try {
      const applied = await Promise.all(pools.map((sql) => migrate(sql)));
      const files = migrationFiles().map((m) => m.name);
      // One instance applied everything; the others, waiting on the lock, found nothing left to do.
      assert.deepEqual(applied.map((a) => a.length).sort(), [0, 0, files.length]);
      assert.deepEqual(applied.find((a) => a.length > 0), files);
      const rows = await pools[0]!<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
      assert.deepEqual(rows.map((r) => r.version), migrationFiles().map((m) => m.version));
      assert.deepEqual(await migrate(pools[1]!), [], 'a later start applies nothing');
    } finally {
      await Promise.all(pools.map((sql) => sql.end()));
    }
  });
});

// Written through the HTTP surface and the documented settings only, so that it
// holds whatever the store's internals.

describe('two instances sharing one Redis', redis.options, () => {
  const LIMIT = 12;
  const env = {
    REDIS_URL: TEST_REDIS_URL,
    RATE_LIMIT_PER_TEAM: String(LIMIT),
    // The per-IP limit is out of the way: every injected request comes from 127.0.0.1.
    RATE_LIMIT_PER_IP: NO_RATE_LIMITS.RATE_LIMIT_PER_IP,
    // A long window: a window boundary falling inside the test would legitimately allow more.
    RATE_LIMIT_WINDOW_S: '3600',
  };
  let sqlA: Sql;
  let appA: App;
  let appB: App;

  // First: without Redis (under CI=true) the suite fails here, saying what is missing, before any app is built.
  before(redis.ensure);
  twoInstances(env, (i) => ({ sqlA, appA, appB } = i));

  it('never lets a team exceed one limit across both instances', async () => {
    // A new team: its counters in Redis start at zero whatever else uses that Redis.
    const team = await teamWithKey(sqlA);
    const headers = { 'x-service-api-key': team.key };
    const answers = await Promise.all(Array.from({ length: LIMIT * 3 }, (_, i) =>
      (i % 2 === 0 ? appA : appB).inject({ url: '/v2/user/?limit=1', headers })));
    const byApp = (app: 0 | 1, status: number) => answers.filter((a, i) => i % 2 === app && a.statusCode === status).length;
    const allowed = byApp(0, 200) + byApp(1, 200);
    assert.equal(allowed, LIMIT, `${allowed} requests allowed for a limit of ${LIMIT}`);
    assert.equal(allowed + byApp(0, 429) + byApp(1, 429), answers.length, 'every answer is 200 or 429');
    assert.ok(byApp(0, 429) > 0 && byApp(1, 429) > 0, 'both instances refuse once the shared limit is reached');
    const refused = answers.find((a) => a.statusCode === 429)!;
    assert.ok(Number(refused.headers['retry-after']) >= 1);
  });
});

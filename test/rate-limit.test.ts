/**
 * Rate limits per client address (before authentication) and per team
 * (after it), in memory and shared through this machine's Redis, and what
 * happens when Redis is unreachable or goes away under traffic. The tests
 * that share limits need a Redis server (HDS_TEST_REDIS_URL, by default
 * 127.0.0.1:6379): without one they are skipped, saying how to get it,
 * except under CI=true, where they fail.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { MemoryStore, RedisStore } from '../src/http/rate-limit-store.js';
import { countsInRedis, loggedApp, redisFallbacks, requireRedis, teamWithKey, testApp, testRedisAddress, testSql, TEST_REDIS_URL, until } from './helpers.js';

const redis = await requireRedis();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A Redis key prefix of this test's own: other tests share the Redis. */
const prefix = () => `hds-test:${randomBytes(6).toString('hex')}:`;

const list = (app: App, key: string) => app.inject({ url: '/v2/user/?limit=1', headers: { 'x-service-api-key': key } });
const rejections = async (app: App, scope: string) =>
  (await app.metrics.rateLimitRejections.get()).values.find((v) => v.labels.scope === scope)?.value ?? 0;

/** The store's Redis command timeout (src/http/rate-limit-store.ts): a request that waited on Redis took at least this long. */
const REDIS_COMMAND_TIMEOUT_MS = 250;

/** Runs `count` list requests one after the other; their statuses and how long each took. */
async function timedLists(app: App, key: string, count: number): Promise<{ codes: number[]; ms: number[] }> {
  const codes: number[] = [];
  const ms: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = Date.now();
    codes.push((await list(app, key)).statusCode);
    ms.push(Date.now() - started);
  }
  return { codes, ms };
}

/**
 * No request waited on Redis: one that does takes at least the command
 * timeout, so most answering faster shows they did not, however slow the
 * machine (a total time for N requests would be a speed assumption).
 */
function assertNoWaitOnRedis(ms: number[]): void {
  const fast = ms.filter((m) => m < REDIS_COMMAND_TIMEOUT_MS).length;
  assert.ok(fast > ms.length / 2, `requests waited on Redis: ${ms.join(' ')} ms (a wait is at least ${REDIS_COMMAND_TIMEOUT_MS} ms)`);
}

describe('rate limits in memory', () => {
  let sql: Sql;
  before(() => { sql = testSql(); });
  after(async () => { await sql.end(); });

  it('limits each team separately, with RateLimit headers under the limit and a 429 over it', async () => {
    const app = await testApp(sql, { RATE_LIMIT_PER_TEAM: '5', RATE_LIMIT_PER_IP: '1000', RATE_LIMIT_WINDOW_S: '60' });
    try {
      const [a, b] = [await teamWithKey(sql), await teamWithKey(sql)];
      for (let i = 1; i <= 5; i++) {
        const res = await list(app, a.key);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['ratelimit-policy'], '"ip";q=1000;w=60, "team";q=5;w=60');
        assert.match(String(res.headers.ratelimit), new RegExp(`^"ip";r=${1000 - i};t=\\d+, "team";r=${5 - i};t=\\d+$`));
      }
      const refused = await list(app, a.key);
      assert.equal(refused.statusCode, 429);
      assert.deepEqual(refused.json(), { detail: 'Rate limit exceeded' });
      const retryAfter = Number(refused.headers['retry-after']);
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${refused.headers['retry-after']}`);
      assert.match(String(refused.headers.ratelimit), /"team";r=0;t=\d+$/);
      assert.equal(await rejections(app, 'team'), 1);
      // Another team is not affected.
      assert.equal((await list(app, b.key)).statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it('limits a client address before authentication: bad keys use it up too', async () => {
    const app = await testApp(sql, { RATE_LIMIT_PER_TEAM: '1000', RATE_LIMIT_PER_IP: '4' });
    try {
      const team = await teamWithKey(sql);
      for (let i = 0; i < 4; i++) {
        const res = await list(app, `hds_${randomBytes(32).toString('base64url')}`);
        assert.equal(res.statusCode, 401);
        assert.match(String(res.headers.ratelimit), new RegExp(`^"ip";r=${3 - i};t=\\d+$`));
      }
      const refused = await list(app, team.key);
      assert.equal(refused.statusCode, 429, 'a valid key from an address that is over its limit is refused');
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      assert.equal(await rejections(app, 'ip'), 1);
      // Probes are not limited: an orchestrator must not take a flood for a dead instance.
      assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
      // Another address has its own budget.
      const other = await app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key }, remoteAddress: '10.1.2.3' });
      assert.equal(other.statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it('starts a new window once the old one ends', async () => {
    const app = await testApp(sql, { RATE_LIMIT_PER_TEAM: '2', RATE_LIMIT_WINDOW_S: '1' });
    try {
      // Three requests fill a one-second window only if they all fall inside it: on a slow machine
      // they may not, then the third is rightly let through. Each try is a new team, a new window.
      let team = await teamWithKey(sql);
      for (let attempt = 1; ; attempt++) {
        const started = Date.now();
        const codes = [(await list(app, team.key)).statusCode, (await list(app, team.key)).statusCode, (await list(app, team.key)).statusCode];
        if (Date.now() - started < 1000) {
          assert.deepEqual(codes, [200, 200, 429]);
          break;
        }
        assert.deepEqual(codes.slice(0, 2), [200, 200]);
        assert.ok(attempt < 50, 'three requests never fell within one second');
        team = await teamWithKey(sql);
      }
      // The window passing is what is tested here: this wait is the behaviour, not a guess at speed.
      await sleep(1100);
      assert.equal((await list(app, team.key)).statusCode, 200);
    } finally {
      await app.close();
    }
  });
});

describe('rate limits shared through Redis', () => {
  let sql: Sql;
  before(() => { sql = testSql(); });
  after(async () => { await sql.end(); });

  it('two instances together never let an address or a team exceed one limit', redis.options, async () => {
    redis.ensure();
    /**
     * Limits are shared while both instances count in Redis. One that started before its connection was
     * ready counts in memory until it is (and says so, then says it is back): the requests wait for that.
     * One whose Redis did not answer a command in time falls back for a second, also saying so: a try in
     * which that happened is tried again (test/client-addresses.test.ts does the same).
     */
    for (let attempt = 1; ; attempt++) {
      const env = { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: prefix(), RATE_LIMIT_PER_IP: '20', RATE_LIMIT_PER_TEAM: '8', RATE_LIMIT_WINDOW_S: '600' };
      const apps = [await loggedApp(sql, env), await loggedApp(sql, env)];
      try {
        await until('both instances count in Redis', 30_000, () => apps.every((a) => countsInRedis(a.lines)));
        const before = apps.map((a) => redisFallbacks(a.lines));
        const team = await teamWithKey(sql);
        const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => list(apps[i % 2]!.app, team.key)));
        const more = await Promise.all(apps.map((a) => list(a.app, team.key)));
        if (attempt < 3 && apps.some((a, i) => redisFallbacks(a.lines) > before[i]!)) continue;
        const codes = answers.map((a) => a.statusCode);
        assert.equal(codes.filter((c) => c === 200).length, 8, `team: ${codes.join(' ')}`);
        assert.ok(codes.every((c) => c === 200 || c === 429));
        // Every request so far was counted against the address too (24 of 20): the rest are refused on both.
        assert.deepEqual(more.map((r) => r.statusCode), [429, 429]);
        assert.match(String(more[0]!.headers.ratelimit), /^"ip";r=0;/);
        return;
      } finally {
        await Promise.all(apps.map((a) => a.app.close()));
      }
    }
  });

  it('does not take Redis for unavailable while its own event loop stalls', redis.options, async () => {
    redis.ensure();
    const logged: string[] = [];
    const log = { warn: (_o: object, msg: string) => void logged.push(msg), info: (_o: object, msg: string) => void logged.push(msg) };
    const store = await RedisStore.open(TEST_REDIS_URL, prefix(), 60_000, new MemoryStore(60_000), log);
    try {
      await store.connected(30_000);
      assert.deepEqual(logged, []);
      const ip = store.scoped('ip:');
      const counted = ip.hit('192.0.2.1');
      // Redis answers at once, but this process reads nothing for longer than the command timeout (250 ms).
      const stalledUntil = Date.now() + 600;
      while (Date.now() < stalledUntil) {
        // A synchronous busy wait.
      }
      assert.equal((await counted).count, 1);
      assert.equal((await ip.hit('192.0.2.1')).count, 2, 'still counted in Redis');
      assert.deepEqual(logged, [], 'no fallback to memory');
    } finally {
      await store.close();
    }
  });

  // No Redis needed: port 1 is closed on purpose. Runs everywhere.
  it('keeps answering, counting in memory, when Redis is unreachable from the start', async () => {
    const { app, lines } = await loggedApp(sql, { REDIS_URL: 'redis://127.0.0.1:1', REDIS_KEY_PREFIX: prefix(), RATE_LIMIT_PER_TEAM: '3' });
    try {
      const team = await teamWithKey(sql);
      const { codes, ms } = await timedLists(app, team.key, 4);
      assert.deepEqual(codes, [200, 200, 200, 429], 'the limit still holds, per instance');
      assertNoWaitOnRedis(ms);
      await until('the fallback is logged', 30_000, () => lines().some((l) => l.level === 40 && /Redis unavailable/.test(l.msg)));
    } finally {
      await app.close();
    }
  });

  // No Redis needed either: a server that accepts connections and never answers.
  it('says it counts in memory when it starts while Redis does not answer', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => { sockets.add(socket); socket.on('error', () => {}); });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as net.AddressInfo;
    const { app, lines } = await loggedApp(sql, { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix() });
    try {
      // Logged before the app was ready: an operator sees that this instance started without shared limits.
      // (Here the connection's first command times out; a connection still not made after a second says the same.)
      assert.ok(lines().some((l) => l.level === 40 && /Redis unavailable/.test(l.msg)), JSON.stringify(lines()));
    } finally {
      await app.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  it('keeps answering when Redis goes away under traffic, and shares limits again when it is back', redis.options, async () => {
    redis.ensure();
    // A TCP relay in front of Redis: closing it is Redis going down, as the app sees it.
    const sockets = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      const upstream = net.connect(testRedisAddress());
      for (const s of [client, upstream]) { sockets.add(s); s.on('error', () => {}); s.on('close', () => sockets.delete(s)); }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as net.AddressInfo).port;
    const keyPrefix = prefix();
    const relayUrl = new URL(TEST_REDIS_URL);
    relayUrl.hostname = '127.0.0.1';
    relayUrl.port = String(port);
    const { app, lines } = await loggedApp(sql, { REDIS_URL: relayUrl.toString(), REDIS_KEY_PREFIX: keyPrefix, RATE_LIMIT_PER_TEAM: '1000' });
    const direct = new Redis(TEST_REDIS_URL);
    try {
      const team = await teamWithKey(sql);
      assert.equal((await list(app, team.key)).statusCode, 200);

      relay.close();
      for (const s of sockets) s.destroy();
      const during = await timedLists(app, team.key, 20);
      assert.ok(during.codes.every((c) => c === 200), during.codes.join(' '));
      assertNoWaitOnRedis(during.ms);
      // Logged at the first failed reconnection, which may come after the requests above.
      await until('the fallback is logged', 30_000, () => lines().some((l) => /Redis unavailable/.test(l.msg)));

      await new Promise<void>((r) => relay.listen(port, '127.0.0.1', r));
      await until('reconnected to Redis', 30_000, () => lines().some((l) => /Redis is back/.test(l.msg)));
      // Past the store's pause after the last failure (RETRY_REDIS_AFTER_MS): the behaviour, not a guess at speed.
      await sleep(1100);
      assert.equal((await list(app, team.key)).statusCode, 200);
      // Counted in Redis again: the first request and this one (the 20 in between were counted in memory).
      assert.equal(await direct.get(`${keyPrefix}rl:team:${team.teamId}`), '2');
    } finally {
      direct.disconnect();
      await app.close();
      relay.close();
      for (const s of sockets) s.destroy();
    }
  });
});

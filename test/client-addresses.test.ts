/**
 * Per-address defences: a budget of failed authentications that cuts off a
 * flood of bad keys (shared through Redis when there is one), and the client
 * address behind trusted proxies.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it, mock } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { countsInRedis, loggedApp, NO_RATE_LIMITS, redisFallbacks, requireRedis, teamWithUsers, testApp, testSql, TEST_REDIS_URL, until, type TeamWithUsers } from './helpers.js';

const BUDGET = 5;
/** Long enough that no run is slow enough to see a window end by itself; the end is brought about with a mocked clock. */
const WINDOW_S = 60;
const redis = await requireRedis();

let sql: Sql;
let team: TeamWithUsers;
before(async () => {
  sql = testSql();
  team = await teamWithUsers(sql, 2);
});
after(async () => {
  await sql.end();
});

describe('failed authentications per address', () => {

  const badKey = () => `hds_${randomBytes(32).toString('base64url')}`;
  const ask = (app: App, remoteAddress: string, key: string) =>
    app.inject({ url: '/v2/user/?limit=1', remoteAddress, headers: { 'x-service-api-key': key } });

  /** A flood of bad keys from one address is cut off (and another address is served throughout): the flooder's address. */
  async function floodIsCutOff(app: App): Promise<string> {
    const flooder = `198.51.100.${1 + (randomBytes(1)[0]! % 200)}`, honest = '203.0.113.9';
    const statuses: number[] = [];
    for (let i = 0; i < BUDGET * 4; i++) {
      statuses.push((await ask(app, flooder, badKey())).statusCode);
      assert.equal((await ask(app, honest, team.key)).statusCode, 200, 'another address is served throughout');
    }
    assert.deepEqual(statuses.slice(0, BUDGET), Array(BUDGET).fill(401), 'the budget is spent on 401s');
    assert.deepEqual(statuses.slice(BUDGET), Array(BUDGET * 3).fill(429), 'then the address is cut off');

    const lookups = app.verifier.lookups, judged = app.verifier.accepted + app.verifier.rejected;
    const cutOff = await ask(app, flooder, team.key);
    assert.equal(cutOff.statusCode, 429, 'a valid key too');
    assert.ok(Number(cutOff.headers['retry-after']) >= 1);
    assert.match(String(cutOff.headers['ratelimit-policy']), new RegExp(`"auth";q=${BUDGET};w=${WINDOW_S}`));
    assert.match(String(cutOff.headers.ratelimit), /"auth";r=0;t=\d+/);
    assert.deepEqual(cutOff.json(), { detail: 'Rate limit exceeded' });
    for (let i = 0; i < 10; i++) await ask(app, flooder, badKey());
    assert.equal(app.verifier.lookups, lookups, 'cut-off attempts cost no database lookup');
    assert.equal(app.verifier.accepted + app.verifier.rejected, judged, 'nor a key check (no hashing)');
    return flooder;
  }

  it('cuts off a flood of bad keys from one address, not the others, until the window ends', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() });
    const app = await testApp(sql, { ...NO_RATE_LIMITS, AUTH_FAILURES_PER_IP: String(BUDGET), RATE_LIMIT_WINDOW_S: String(WINDOW_S) });
    try {
      const flooder = await floodIsCutOff(app);
      mock.timers.tick(WINDOW_S * 1000 - 1_000);
      assert.equal((await ask(app, flooder, team.key)).statusCode, 429, 'still cut off before the window ends');
      mock.timers.tick(1_000);
      assert.equal((await ask(app, flooder, team.key)).statusCode, 200, 'served again once it ended');
    } finally {
      mock.timers.reset();
      await app.close();
    }
  });

  it('shares the budget between instances through Redis', redis.options, async () => {
    redis.ensure();
    /**
     * An instance counts in its own memory while it has no answer from Redis:
     * not connected yet (it says so, and says when it is back: the flood
     * waits for that), or a command unanswered for 250 ms of time in which
     * the process could run; then the two instances do not share, as
     * designed, and say so in their log. A try in which an instance fell
     * back is tried again; a try without that must share.
     */
    for (let attempt = 1; ; attempt++) {
      const env = {
        ...NO_RATE_LIMITS, AUTH_FAILURES_PER_IP: String(BUDGET), RATE_LIMIT_WINDOW_S: String(WINDOW_S),
        REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: `hds-test-${randomUUID()}:`,
      };
      const [a, b] = [await loggedApp(sql, env), await loggedApp(sql, env)];
      try {
        // An instance that started before its connection was ready says so, and says when it is back: wait for that.
        await until('both instances count in Redis', 30_000, () => countsInRedis(a.lines) && countsInRedis(b.lines));
        const flooder = `192.0.2.${attempt}`;
        for (let i = 0; i < BUDGET; i++) assert.equal((await ask(i % 2 ? a.app : b.app, flooder, badKey())).statusCode, 401);
        // The failures were counted on both instances together (in Redis, once each was answered); each refuses now.
        const shared = await until('both instances see the budget spent', 30_000, async () =>
          (await ask(a.app, flooder, team.key)).statusCode === 429 && (await ask(b.app, flooder, team.key)).statusCode === 429).then(() => true, (err) => {
          if (attempt < 3 && (redisFallbacks(a.lines) > 0 || redisFallbacks(b.lines) > 0)) return false;
          throw err;
        });
        if (!shared) continue;
        await floodIsCutOff(a.app);
        return;
      } finally {
        await a.app.close();
        await b.app.close();
      }
    }
  });
});

describe('clients behind trusted proxies', () => {

  const PROXY = '10.1.2.3';
  const ask = (app: App, remoteAddress: string, forwardedFor?: string) => app.inject({
    url: '/v2/user/?limit=1', remoteAddress,
    headers: { 'x-service-api-key': team.key, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
  });

  it('counts and logs the client a trusted proxy names, each against its own budget', async () => {
    const { app, lines } = await loggedApp(sql, { ...NO_RATE_LIMITS, TRUST_PROXY: '10.0.0.0/8,192.168.1.1', RATE_LIMIT_PER_IP: '3' });
    try {
      for (const client of ['203.0.113.10', '203.0.113.11']) {
        const statuses = [];
        for (let i = 0; i < 4; i++) statuses.push((await ask(app, PROXY, client)).statusCode);
        assert.deepEqual(statuses, [200, 200, 200, 429], `${client} has a budget of its own behind the proxy`);
      }
      const logged = lines().filter((l) => l.msg === 'request').map((l) => l.ip);
      assert.deepEqual([...new Set(logged)], ['203.0.113.10', '203.0.113.11'], 'the log records the client, not the proxy');
    } finally {
      await app.close();
    }
  });

  it('writes whatever a trusted proxy names as the client into a valid log line, escaped', async () => {
    const { app, lines } = await loggedApp(sql, { ...NO_RATE_LIMITS, TRUST_PROXY: '10.0.0.0/8' });
    try {
      // No comma: X-Forwarded-For is a comma-separated list, and the proxy's client is its last entry.
      const forged = 'x"}{"level":60 "msg":"forged\\';
      assert.equal((await ask(app, PROXY, forged)).statusCode, 200);
      const [line] = lines().filter((l) => l.msg === 'request');
      assert.equal(line!.ip, forged, 'the line parses, and holds the value as it was');
    } finally {
      await app.close();
    }
  });

  it('believes no X-Forwarded-For from a peer it does not trust, and none at all by default', async () => {
    for (const env of [{ TRUST_PROXY: '10.0.0.0/8' }, {}] as Record<string, string>[]) {
      const { app, lines } = await loggedApp(sql, { ...NO_RATE_LIMITS, ...env, RATE_LIMIT_PER_IP: '3' });
      try {
        const peer = env.TRUST_PROXY ? '198.51.100.20' : PROXY;
        const statuses = [];
        // A forged header, different each time, does not give the peer a new budget.
        for (let i = 0; i < 4; i++) statuses.push((await ask(app, peer, `203.0.113.${50 + i}`)).statusCode);
        assert.deepEqual(statuses, [200, 200, 200, 429]);
        assert.deepEqual([...new Set(lines().filter((l) => l.msg === 'request').map((l) => l.ip))], [peer]);
      } finally {
        await app.close();
      }
    }
  });

  it('refuses a TRUST_PROXY that is not addresses or CIDR ranges', async () => {
    await assert.rejects(testApp(sql, { TRUST_PROXY: 'everyone' }), /TRUST_PROXY entries must be/);
  });
});

/**
 * Bounds on what one client can make the service hold: body and header
 * size, header and request time (a client sending one byte a second),
 * keep-alive, database statement time and pool size, and page parameters.
 * The socket tests run against a real listening server with a raw socket.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import { openDatabase } from '../src/db/database.js';
import type { Sql } from '../src/db/client.js';
import { teamWithKey, testApp, testConfig, testSql, until, type TestTeam } from './helpers.js';

interface Outcome { closedAfterMs: number; received: string }

/**
 * Writes `first` at once, then `drip` one byte per `everyMs`; resolves when
 * the server closes the connection, with the time from the first write (the
 * server's clocks start with the connection, not with our connect() call).
 */
function dripUntilClosed(port: number, first: string, drip: string, everyMs: number, giveUpMs: number): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let started = Date.now();
    let received = '';
    let i = 0;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => { socket.destroy(); reject(new Error(`still connected after ${giveUpMs} ms`)); }, giveUpMs);
    socket.on('connect', () => {
      started = Date.now();
      socket.write(first);
      timer = setInterval(() => { if (!socket.destroyed) socket.write(drip[i++ % drip.length]!); }, everyMs);
    });
    socket.on('data', (d) => (received += d));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ closedAfterMs: Date.now() - started, received });
    });
  });
}

describe('resource limits', () => {
  let sql: Sql;
  let app: App;
  let port: number;
  let team: TestTeam;

  before(async () => {
    sql = testSql();
    app = await testApp(sql, { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000', KEEP_ALIVE_TIMEOUT_MS: '500', MAX_HEADER_BYTES: '8192' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as net.AddressInfo).port;
    team = await teamWithKey(sql);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('refuses a body over 16 KiB with 413', async () => {
    const headers = { 'x-service-api-key': team.key, 'content-type': 'application/json' };
    const res = await app.inject({ method: 'POST', url: '/v2/user/', headers, payload: JSON.stringify({ client_user_id: 'x'.repeat(17 * 1024) }) });
    assert.equal(res.statusCode, 413);
    assert.equal(typeof res.json().detail, 'string');
    const fits = await app.inject({ method: 'POST', url: '/v2/user/', headers, payload: JSON.stringify({ client_user_id: 'x'.repeat(15 * 1024) }) });
    assert.equal(fits.statusCode, 422, 'a body under the limit is read (and its too-long value refused)');
  });

  it('refuses headers over MAX_HEADER_BYTES', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/v2/user/`, { headers: { 'x-service-api-key': team.key, 'x-padding': 'a'.repeat(10_000) } });
    assert.equal(res.status, 431);
    const ok = await fetch(`http://127.0.0.1:${port}/v2/user/`, { headers: { 'x-service-api-key': team.key, 'x-padding': 'a'.repeat(1000) } });
    assert.equal(ok.status, 200);
  });

  it('disconnects a client that sends its headers one byte a second (HEADERS_TIMEOUT_MS)', async () => {
    const { closedAfterMs, received } = await dripUntilClosed(port, 'GET /v2/user/ HTTP/1.1\r\nHost: x\r\n', 'x-slow: aaaaaaaaaaaaaaaaaaaa', 1000, 6000);
    // Node checks every second (connectionsCheckingInterval): the timeout plus at most one check.
    assert.ok(closedAfterMs < 3000, `closed after ${closedAfterMs} ms`);
    assert.match(received, /^HTTP\/1\.1 408/);
  });

  it('disconnects a client that sends its body one byte a second (REQUEST_TIMEOUT_MS)', async () => {
    const head = `POST /v2/user/ HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${team.key}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"client_user_id":"`;
    const { closedAfterMs } = await dripUntilClosed(port, head, 'a', 300, 8000);
    assert.ok(closedAfterMs >= 1500 && closedAfterMs < 4500, `closed after ${closedAfterMs} ms`);
  });

  it('closes an idle kept-alive connection after KEEP_ALIVE_TIMEOUT_MS', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    // Taken when the answer arrives, not when a poll notices it: a late poll would shorten the idle time measured.
    let answeredAt: number | undefined;
    socket.on('data', (d) => {
      received += d;
      if (answeredAt === undefined && received.includes('\r\n\r\n')) answeredAt = Date.now();
    });
    await new Promise((r) => socket.once('connect', r));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`);
    await until('the answer arrives', 30_000, () => answeredAt);
    assert.match(received, /^HTTP\/1\.1 200/);
    const idleMs = (await closed) - answeredAt!;
    assert.ok(idleMs >= 300 && idleMs < 2000, `idle connection closed after ${idleMs} ms`);
  });

  it('keeps page parameters from making a request expensive', async () => {
    const get = (query: string) => app.inject({ url: `/v2/user/?${query}`, headers: { 'x-service-api-key': team.key } });
    for (const query of ['limit=501', 'limit=1000000000', 'limit=-1', 'offset=-1', 'offset=1e400', 'offset=99999999999999999999']) {
      const res = await get(query);
      assert.equal(res.statusCode, 422, query);
      assert.equal(res.json().detail[0].loc[0], 'query');
    }
    // The largest accepted offset is answered at once, with an empty page.
    const started = Date.now();
    const deep = await get(`offset=${2 ** 53 - 1}&limit=500`);
    assert.equal(deep.statusCode, 200);
    assert.deepEqual(deep.json().users, []);
    assert.ok(Date.now() - started < 1000);
  });

  it('applies DB_STATEMENT_TIMEOUT_MS and DB_POOL_MAX to the pool', async () => {
    const appName = `hds-limits-${randomBytes(4).toString('hex')}`;
    const db = await openDatabase(testConfig({ DB_STATEMENT_TIMEOUT_MS: '200', DB_POOL_MAX: '3' }), () => {}, appName);
    try {
      await assert.rejects(db.sql`SELECT pg_sleep(1)`, (err: { code?: string }) => err.code === '57014');
      // Ten concurrent queries share three sessions.
      await Promise.all(Array.from({ length: 10 }, () => db.sql`SELECT pg_sleep(0.05)`));
      const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${appName}`;
      assert.ok(row!.n >= 1 && row!.n <= 3, `${row!.n} sessions`);
    } finally {
      await db.close();
    }
  });
});

/**
 * What the driver setup (src/db/client.ts) promises when connections die:
 * a connection reset while it is being set up fails the query that needed
 * it and nothing else (postgres.js's own fetch of the array types, which
 * this setup replaces, left such a failure unhandled: a crash); and the
 * array types it knows without that fetch read and write every kind of
 * array the service uses (src/db/array-types.ts). A transaction whose
 * backend is killed fails alone and writes nothing more to the closed
 * socket (src/db/transaction-gate.ts), on the service's pool and on the
 * CLI's. The gate refuses a driver without the internals it relies on.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { TransactionSql } from 'postgres';
import { connect, type Sql } from '../src/db/client.js';
import { openDatabase } from '../src/db/database.js';
import { checkDriverInternals } from '../src/db/transaction-gate.js';
import { databaseUrl, guardedTestSql, testConfig, testSql, until, watchForCrashes } from './helpers.js';

/** Two turns of the event loop: an unhandled rejection is reported once the microtasks after it have run. */
const turns = async () => {
  for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
};

describe('a connection reset while it is being set up', () => {
  let relay: net.Server;
  let sql: Sql;

  before(async () => {
    const target = new URL(databaseUrl());
    // A relay to the suite's PostgreSQL that resets each connection (RST, as a server killed mid-session does)
    // at the client's second message: its first query, once the server has accepted it.
    relay = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      let messages = 0;
      for (const socket of [client, upstream]) socket.on('error', () => {});
      client.on('data', (data) => {
        if (++messages === 2) {
          client.resetAndDestroy();
          upstream.destroy();
        } else {
          upstream.write(data);
        }
      });
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const url = new URL(databaseUrl());
    url.hostname = '127.0.0.1';
    url.port = String((relay.address() as net.AddressInfo).port);
    sql = connect(url.toString(), { max: 1, connectTimeoutS: 5 });
  });
  after(async () => {
    await sql?.end({ timeout: 0 });
    relay?.close();
  });

  it('fails the query that needed it, and leaves nothing unhandled', async () => {
    const crashes = watchForCrashes();
    await assert.rejects(sql`SELECT 1`, (err: { code?: string }) => err.code === 'ECONNRESET');
    await turns();
    crashes.assertNone();
  });
});

describe('array parameters and columns', () => {
  let sql: Sql;
  before(() => { sql = testSql(); });
  after(async () => { await sql.end(); });

  it('sends text, uuid, integer, date and time arrays as they are, nulls and awkward text included', async () => {
    const texts = ['plain', 'with "quotes"', 'back\\slash', 'a,b', '{braces}', '', 'NULL', 'ünïcödé ✓', ' spaced '];
    const uuids = ['409d9870-21fb-443a-8daa-c5222659f40e', '00000000-0000-4000-8000-000000000000'];
    const [row] = await sql<{ texts: string[]; nulls: (string | null)[]; uuids: string[]; ints: number[]; dates: string; times: string }[]>`
      SELECT ${texts}::text[] AS texts, ${['a', null]}::text[] AS nulls, ${uuids}::uuid[] AS uuids, ${[1, -2, 2147483647]}::int[] AS ints,
             (${['2024-02-29', '1980-03-13']}::date[])::text AS dates,
             (${['2022-08-04T12:42:45.596792+00:00']}::timestamptz[])::text AS times`;
    assert.deepEqual(row!.texts, texts);
    assert.deepEqual(row!.nulls, ['a', null]);
    assert.deepEqual(row!.uuids, uuids);
    assert.deepEqual(row!.ints, [1, -2, 2147483647]);
    assert.equal(row!.dates, '{2024-02-29,1980-03-13}');
    assert.equal(row!.times, '{"2022-08-04 12:42:45.596792+00"}');
    // As one value among several: unnest pairs the arrays up as the service's batch statements do.
    const pairs = await sql<{ id: string; n: number }[]>`SELECT * FROM unnest(${uuids}::uuid[], ${[7, 8]}::int[]) AS p(id, n)`;
    assert.deepEqual(pairs.map((p) => [p.id, p.n]), [[uuids[0], 7], [uuids[1], 8]]);
  });

  it('reads array columns as the driver reads their elements', async () => {
    const [row] = await sql<Record<string, unknown>[]>`
      SELECT '{1,2,3}'::smallint[] AS small, '{{1,2},{3,4}}'::int[] AS nested, '{9007199254740993}'::bigint[] AS big,
             '{t,f,NULL}'::bool[] AS flags, ARRAY['x y', 'q"t', 'NULL', NULL]::text[] AS texts, '[0:1]={5,6}'::int[] AS bounded,
             '{}'::int[] AS empty, ARRAY['{"a":1}']::jsonb[] AS docs`;
    assert.deepEqual(row, {
      small: [1, 2, 3], nested: [[1, 2], [3, 4]], big: ['9007199254740993'], flags: [true, false, null],
      texts: ['x y', 'q"t', 'NULL', null], bounded: [5, 6], empty: [], docs: [{ a: 1 }],
    });
  });
});

/** A pool as a process opens it, and how to end it. */
type OpenPool = () => Promise<{ sql: Sql; end(): Promise<void> }>;

for (const [whose, open] of [
  ['the service\'s pool (behind the freeze guard)', async () => guardedTestSql()],
  ['the CLI\'s pool (openDatabase without the freeze guard)', async () => {
    const db = await openDatabase(testConfig(), () => {}, 'hds-test-cli-pool');
    return { sql: db.sql, end: () => db.closePools() };
  }],
] as [string, OpenPool][]) describe(`a transaction whose connection is lost, on ${whose}`, () => {
  let pool: Awaited<ReturnType<OpenPool>>;
  let killer: Sql;

  before(async () => {
    pool = await open();
    killer = testSql();
  });
  after(async () => {
    await pool.end();
    await killer.end();
  });

  /** How a transaction ended: its value, or its error's code. */
  const outcomeOf = (transaction: Promise<unknown>) =>
    transaction.then((value) => ({ value }), (err: { code?: string }) => ({ failed: err.code }));
  const assertFailedOnTheConnection = (outcome: { value: unknown } | { failed?: string }) =>
    assert.ok('failed' in outcome && /^CONNECTION_/.test(String(outcome.failed)), JSON.stringify(outcome));

  /** Runs `body` in a transaction of the pool, its backend killed while it waits in `pg_sleep`; how begin ended. */
  const killedUnder = async (body: (tx: TransactionSql, sleep: () => Promise<unknown>) => Promise<unknown>) => {
    const marker = `sleep-${randomUUID()}`;
    const outcome = outcomeOf(pool.sql.begin((tx) => body(tx, () => tx.unsafe(`SELECT pg_sleep(30) AS "${marker}"`))));
    const pid = await until('the transaction sleeping', 10_000, async () => {
      const [row] = await killer<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE query LIKE ${`%${marker}%`} AND pid <> pg_backend_pid()`;
      return row?.pid;
    });
    await killer`SELECT pg_terminate_backend(${pid}::int)`;
    return outcome;
  };

  it('refuses a statement made after a loss that came while none was out; the process lives on', async () => {
    const crashes = watchForCrashes();
    let resume!: () => void;
    const resumed = new Promise<void>((r) => { resume = r; });
    let pid!: (pid: number) => void;
    const backend = new Promise<number>((r) => { pid = r; });
    const outcome = outcomeOf(pool.sql.begin(async (tx) => {
      pid((await tx<[{ pid: number }]>`SELECT pg_backend_pid() AS pid`)[0].pid);
      await resumed; // the connection is killed meanwhile, with nothing of this transaction out on it
      return tx`SELECT 1`;
    }));
    await killer`SELECT pg_terminate_backend(${await backend}::int)`;
    assertFailedOnTheConnection(await outcome);
    resume();
    await turns();
    crashes.assertNone();
  });

  for (const [what, body] of [
    ['fails, and writes no ROLLBACK to the closed socket', async (_tx, sleep) => sleep()],
    ['fails even when its callback catches the error and returns: no COMMIT is written', async (_tx, sleep) => sleep().catch(() => 'caught')],
    ['refuses a statement made after the loss, which is never sent', async (tx, sleep) => {
      await sleep().catch(() => undefined);
      return tx`SELECT 1`;
    }],
    ['fails when the loss comes inside a savepoint', async (tx, sleep) => tx.savepoint(() => sleep())],
  ] as [string, (tx: TransactionSql, sleep: () => Promise<unknown>) => Promise<unknown>][]) {
    it(`${what}; the process lives on`, async () => {
      const crashes = watchForCrashes();
      assertFailedOnTheConnection(await killedUnder(body));
      await turns();
      crashes.assertNone();
      assert.deepEqual([...await pool.sql`SELECT 1 AS one`], [{ one: 1 }], 'the pool goes on');
    });
  }
});

describe('the transaction gate\'s footing', () => {
  it('accepts the pinned driver, and refuses one whose queries lack the internals it relies on', async () => {
    const sql = testSql();
    try {
      checkDriverInternals(sql);
    } finally {
      await sql.end();
    }
    // A stand-in with the pool's shape but queries of another make: what a different postgres.js could give.
    const other = Object.assign(() => Promise.resolve([]), { begin: () => Promise.resolve() });
    assert.throws(() => checkDriverInternals(other as unknown as Sql), /database gate needs postgres\.js internals.*\(handler, resolve, reject\).*verified on postgres 3\.4\.9/);
  });
});

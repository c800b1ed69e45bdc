/**
 * Read replicas on real streaming replication: a primary and a hot standby
 * built with `pg_basebackup -R` from the machine's PostgreSQL 15, in a temp
 * directory, on free ports; the app reads through src/db/read-router.ts.
 * Independent of the DATABASE_URL that `npm test` provides.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { connect, type Sql } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { ReadRouter } from '../src/db/read-router.js';
import { teamWithUsers, type TeamWithUsers } from './helpers.js';
import { freePort } from '../src/free-port.js';

const PG_BIN = '/usr/lib/postgresql/15/bin';
const NEEDED = ['initdb', 'postgres', 'pg_ctl', 'pg_basebackup'];
const READ_APP_NAME = 'hds-replication-test-read';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** PostgreSQL refuses to run as root: use the `postgres` system user then (as src/db/embedded.ts does). */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  return { uid: id('-u'), gid: id('-g') };
}

function pg(bin: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(PG_BIN, bin), args, { ...postgresUser(), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${bin} ${args.join(' ')} failed (exit ${code}): ${output.trim()}`))));
  });
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
  start() { return pg('pg_ctl', ['-D', this.dir, '-l', `${this.dir}.log`, '-w', '-t', '30', 'start']); }
  stop(mode: 'fast' | 'immediate' = 'fast') { return pg('pg_ctl', ['-D', this.dir, '-m', mode, '-w', 'stop']); }
  stopNow(): void {
    try {
      execFileSync(path.join(PG_BIN, 'pg_ctl'), ['-D', this.dir, '-m', 'immediate', '-w', 'stop'], { ...postgresUser(), stdio: 'ignore' });
    } catch { /* not running */ }
  }
}

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(10);
  }
  return Date.now() - start;
}

describe('read replicas on a streaming standby', () => {
  let tmp: string;
  let primary: Server;
  let standby: Server;
  let primarySql: Sql;
  let standbySql: Sql;
  let router: ReadRouter;
  let app: App;
  let team: TeamWithUsers;
  const stopAll = () => { standby?.stopNow(); primary?.stopNow(); };

  const get = (url: string) => app.inject({ url, headers: { 'x-service-api-key': team.key } });
  const replicaReads = () => router.stats().replicas[0]!.reads;
  const replicaHealthy = () => router.stats().replicas[0]!.healthy;

  /** Reads from `concurrency` loops until stop() resolves; returns every status seen. */
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
    const missing = NEEDED.map((b) => path.join(PG_BIN, b)).filter((f) => !fs.existsSync(f));
    if (missing.length > 0) {
      throw new Error(`the replication tests need the PostgreSQL 15 server binaries; missing: ${missing.join(', ')} (Debian: apt-get install postgresql-15)`);
    }
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-replication-'));
    fs.chmodSync(tmp, 0o755);
    const ids = postgresUser();
    if (ids) fs.chownSync(tmp, ids.uid, ids.gid);
    process.once('exit', stopAll);

    primary = new Server(path.join(tmp, 'primary'), await freePort());
    await pg('initdb', ['-D', primary.dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync', '--no-instructions']);
    primary.configure({
      port: String(primary.port), listen_addresses: '127.0.0.1', unix_socket_directories: '',
      wal_level: 'replica', max_wal_senders: '5', max_connections: '60', shared_buffers: '32MB', fsync: 'off',
    });
    await primary.start();

    standby = new Server(path.join(tmp, 'standby'), await freePort());
    await pg('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', standby.dir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
    standby.configure({ port: String(standby.port), hot_standby: 'on' });
    await standby.start();

    primarySql = connect(primary.url, { max: 5, applicationName: 'hds-replication-test' });
    standbySql = connect(standby.url, { max: 5, applicationName: READ_APP_NAME });
    await migrate(primarySql);
    router = new ReadRouter(primarySql, [{ sql: standbySql, url: standby.url }]);
    const config = loadConfig({ DATABASE_URL: primary.url, DATABASE_READ_URLS: standby.url, LOG_LEVEL: 'silent' });
    app = await buildApp({ config, sql: primarySql, reads: router, logger: false });
    team = await teamWithUsers(primarySql, 30);
    await until('the standby replays the imported users', 10_000, async () => {
      const [row] = await standbySql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE team_id = ${team.teamId}`;
      return row!.n === team.users.length;
    });
  });

  after(async () => {
    await app?.close();
    await router?.close();
    await Promise.all([primarySql?.end({ timeout: 1 }), standbySql?.end({ timeout: 1 })]);
    stopAll();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('runs a real hot standby streaming from the primary', async () => {
    const [recovery] = await standbySql<{ standby: boolean }[]>`SELECT pg_is_in_recovery() AS standby`;
    assert.equal(recovery!.standby, true);
    const [streaming] = await primarySql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming'`;
    assert.equal(streaming!.n, 1);
  });

  it('serves reads from the standby', async () => {
    await until('the standby is in rotation', 2000, replicaHealthy);
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

  it('takes a stopped standby out of rotation within a second, failing no request', async () => {
    let detectedMs = 0;
    const statuses = await underLoad(8, async () => {
      await sleep(300);
      assert.ok(replicaHealthy());
      const stopping = standby.stop('fast');
      detectedMs = await until('the router marks the standby down', 1000, () => !replicaHealthy());
      await stopping;
      await sleep(300);
    });
    assert.ok(statuses.length > 50, `only ${statuses.length} requests ran`);
    assert.deepEqual(statuses.filter((s) => s !== 200), [], 'every request under load succeeded');
    assert.ok(detectedMs < 1000, `detected after ${detectedMs} ms`);
    const primaryBefore = router.stats().primaryReads;
    assert.equal((await get('/v2/user/?limit=5')).statusCode, 200);
    assert.equal(router.stats().primaryReads, primaryBefore + 1, 'reads go to the primary while the standby is down');
  });

  it('puts a restarted standby back into rotation', async () => {
    assert.equal(replicaHealthy(), false);
    await standby.start();
    await until('the router marks the standby up', 2000, replicaHealthy);
    const readsBefore = replicaReads();
    const statuses = await underLoad(4, async () => { await sleep(1000); });
    assert.deepEqual(statuses.filter((s) => s !== 200), []);
    assert.ok(replicaReads() - readsBefore > statuses.length / 2, 'most reads are on the standby again');
  });
});

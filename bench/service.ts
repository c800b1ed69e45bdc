import fs from 'node:fs';
import path from 'node:path';
import { runToEnd, startProcess, stopProcess, type Child } from './processes.js';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { freePort } from '../src/db/free-port.js';


/** Where the service and the CLI find their database: a URL, or the embedded PostgreSQL in a data directory. */
export type DatabaseTarget = { databaseUrl: string } | { dataDir: string };

export function databaseEnv(target: DatabaseTarget): Record<string, string | undefined> {
  // Start from our own environment without any database settings, then add the target's.
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: undefined, DATABASE_READ_URLS: undefined, DATA_DIR: undefined };
  if ('databaseUrl' in target) env.DATABASE_URL = target.databaseUrl;
  else env.DATA_DIR = target.dataDir;
  return env;
}

/**
 * A URL the harness can query the service's database with. The embedded
 * PostgreSQL runs only while the service does (the service started it):
 * call this while the service is up, and it attaches to that server.
 */
export async function databaseUrlOf(target: DatabaseTarget): Promise<string> {
  if ('databaseUrl' in target) return target.databaseUrl;
  return (await startEmbeddedPostgres(target.dataDir)).url;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `url` until any HTTP answer arrives; returns the milliseconds since `since`. */
export async function waitForHttp(url: string, child: Child, since: number, timeoutMs: number): Promise<number> {
  let exited: number | string | undefined;
  void child.exited.then((code) => (exited = code));
  for (;;) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) }).then((r) => r.arrayBuffer());
      return Date.now() - since;
    } catch {
      // not listening yet
    }
    if (exited !== undefined) throw new Error(`${child.name} exited (${exited}) before answering`);
    if (Date.now() - since > timeoutMs) throw new Error(`${child.name} did not answer within ${timeoutMs / 1000} s`);
    await sleep(20);
  }
}

export interface Service {
  child: Child;
  baseUrl: string;
  logFile: string;
  /** Milliseconds from spawn to the first answered request. */
  startMs: number;
  dataDir?: string;
}

export interface ServiceOptions {
  root: string;
  target: DatabaseTarget;
  logFile: string;
  workers?: number;
  extraEnv?: Record<string, string>;
  /** Directory for V8 CPU profiles (node --cpu-prof), written when the service exits. */
  profileDir?: string;
  timeoutMs?: number;
}

/**
 * The Node flags `npm start` runs the service with, read from its script
 * (written out there, not in a variable, so that it runs in Windows' shell too).
 * The script may start dist/server.js through a launcher (tools/run-built.mjs,
 * which builds first when needed): the bench has built already and starts
 * dist/server.js itself, with the same flags.
 */
function serviceNodeFlags(root: string): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const flags = /\bnode((?: --\S+)*) (?:\S+\.mjs )?dist\/server\.js/.exec(pkg.scripts.start);
  if (!flags) throw new Error(`bench: cannot find "node ... dist/server.js" in the start script: ${pkg.scripts.start}`);
  return flags[1]!.split(' ').filter(Boolean);
}

/** Starts the built service (dist/server.js) as production would (`npm start`'s Node flags): info logs, to a file. */
export async function startService(o: ServiceOptions): Promise<Service> {
  const port = await freePort();
  const env = {
    ...databaseEnv(o.target),
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    // Rate limits would measure the limiter, not the service: set them out of reach (the unauthorized
    // scenario alone fails authentication some 100,000 times a minute from one address).
    RATE_LIMIT_PER_TEAM: '10000000',
    RATE_LIMIT_PER_IP: '10000000',
    AUTH_FAILURES_PER_IP: '10000000',
    // Any free port for /metrics: a service of another test on this machine may hold the default one.
    METRICS_PORT: '0',
    WORKERS: String(o.workers ?? 1),
    ...o.extraEnv,
  };
  fs.mkdirSync(path.dirname(o.logFile), { recursive: true });
  const since = Date.now();
  const nodeArgs = [...serviceNodeFlags(o.root), ...(o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : [])];
  const child = startProcess('service', process.execPath, [...nodeArgs, path.join(o.root, 'dist/server.js')], { env, logFile: o.logFile });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    const startMs = await waitForHttp(`${baseUrl}/v2/user/`, child, since, o.timeoutMs ?? 60_000);
    return { child, baseUrl, logFile: o.logFile, startMs, dataDir: 'dataDir' in o.target ? o.target.dataDir : undefined };
  } catch (err) {
    await stopService({ child, baseUrl, logFile: o.logFile, startMs: 0, dataDir: 'dataDir' in o.target ? o.target.dataDir : undefined });
    throw new Error(`${(err as Error).message}; see ${o.logFile}`);
  }
}

/** Stops the service; if it died without stopping its embedded PostgreSQL, stops that too. */
export async function stopService(service: Service): Promise<void> {
  await stopProcess(service.child, 30_000);
  if (service.dataDir) await stopOrphanEmbedded(service.dataDir);
}

export async function stopOrphanEmbedded(dataDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!pid || !alive()) return;
  // SIGINT: PostgreSQL's fast shutdown.
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (alive() && Date.now() < deadline) await sleep(100);
  if (alive()) process.kill(pid, 'SIGQUIT');
}

/** Runs the built CLI against the target. */
export async function cli(root: string, target: DatabaseTarget, args: string[]): Promise<string> {
  const { stdout } = await runToEnd('hds ' + args.slice(0, 2).join(' '), process.execPath, [path.join(root, 'dist/cli/hds.js'), ...args], databaseEnv(target));
  return stdout;
}

/** Issues a key for the team with the CLI; the key is alone on the last line. */
export async function createKey(root: string, target: DatabaseTarget, teamId: string): Promise<string> {
  const out = await cli(root, target, ['keys', 'create', '--team', teamId, '--name', 'bench']);
  const key = out.trim().split('\n').pop() ?? '';
  if (!key.startsWith('hds_')) throw new Error('keys create printed no key');
  return key;
}

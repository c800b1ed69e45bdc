import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config.js';
import { openDatabase } from './db/database.js';
import { announceDemo, seedDemoOnFirstStart } from './demo-seed.js';

/**
 * WORKERS=N: the primary process forks N workers that each run the whole
 * server (src/server.ts) and share one listening port through node:cluster,
 * which hands connections to the workers in turn. The primary serves nothing:
 * it prepares the database once, restarts a worker that dies, and on SIGTERM
 * or SIGINT asks every worker to shut down gracefully before it exits.
 */

/** What a worker sends the primary once its API listens. */
export interface ApiListening { hds: 'api-listening'; port: number }

/** Tells the primary, in a worker, that the API listens on `port`; nothing outside a cluster. */
export function reportApiListening(port: number): void {
  if (cluster.isWorker) process.send?.({ hds: 'api-listening', port } satisfies ApiListening);
}

const isApiListening = (message: unknown): message is ApiListening =>
  typeof message === 'object' && message !== null && (message as ApiListening).hds === 'api-listening';

/** True in the process that should fork workers instead of serving. */
export function isClusterPrimary(config: Config): boolean {
  return config.workers > 1 && cluster.isPrimary;
}

const say = (msg: string) => process.stderr.write(`hds: ${msg}\n`);

/** A worker that exits before it listens this many times in a row means the workers cannot start at all. */
const MAX_START_FAILURES = 5;
const RESTART_DELAY_MS = 1000;

/**
 * Starts the embedded PostgreSQL if needed, applies migrations and seeds the demo team: once, here.
 * Workers get the URL, so that none of them starts, seeds or stops the embedded PostgreSQL; this
 * process keeps no pool open while they run, and stops the embedded server last.
 */
async function prepareDatabase(config: Config) {
  const db = await openDatabase({ ...config, dbPoolMax: 1, databaseReadUrls: [] }, say, 'hds-cluster');
  try {
    const demo = await seedDemoOnFirstStart(db, config);
    await db.closePools();
    return { url: db.url, demo, stop: () => db.close() };
  } catch (err) {
    await db.close();
    throw err;
  }
}

export async function runCluster(config: Config): Promise<void> {
  const { url, demo, stop } = await prepareDatabase(config);
  const listened = new WeakSet<Worker>();
  let startFailures = 0;
  let stopping = false;
  let demoShown = false;

  const fork = () => cluster.fork({ DATABASE_URL: url });

  // A worker says when its API listens (its metrics listener listens too: the cluster's own 'listening' is both).
  cluster.on('message', (worker, message: unknown) => {
    if (!isApiListening(message)) return;
    listened.add(worker);
    startFailures = 0;
    say(`worker ${worker.process.pid} listening on port ${message.port}`);
    if (demo && !demoShown) {
      demoShown = true;
      announceDemo(demo, message.port, say);
    }
  });

  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (listened.has(worker)) {
      say(`worker ${worker.process.pid} died (${how}); starting a new one`);
      fork();
      return;
    }
    startFailures++;
    if (startFailures >= MAX_START_FAILURES) {
      say(`workers keep exiting before they listen (last: ${how}); giving up`);
      void shutdown('startup failure', 1);
      return;
    }
    // Waiting keeps a worker that cannot start (database down, port taken) from spinning the CPU.
    say(`worker ${worker.process.pid} exited before listening (${how}); retrying in ${RESTART_DELAY_MS} ms`);
    setTimeout(() => { if (!stopping) fork(); }, RESTART_DELAY_MS);
  });

  const shutdown = async (reason: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    say(`${reason}: stopping ${Object.keys(cluster.workers ?? {}).length} workers`);
    const live = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
    const exited = live.map((w) => new Promise<void>((resolve) => {
      if (w.isDead()) resolve();
      else w.once('exit', () => resolve());
    }));
    // Each worker runs its own phased shutdown (src/server.ts) on SIGTERM.
    for (const w of live) w.process.kill('SIGTERM');
    const force = setTimeout(() => {
      say('workers did not stop in time: killing them');
      for (const w of live) if (!w.isDead()) w.process.kill('SIGKILL');
    }, config.shutdownGraceMs + 5_000);
    await Promise.all(exited);
    clearTimeout(force);
    await stop();
    process.exit(exitCode);
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => void shutdown(signal, 0));
  }

  say(`starting ${config.workers} workers`);
  for (let i = 0; i < config.workers; i++) fork();
}

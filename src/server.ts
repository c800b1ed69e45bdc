import pino from 'pino';
import { buildApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { openDatabase } from './db/database.js';
import { ReadRouter } from './db/read-router.js';
import { isClusterPrimary, runCluster } from './cluster.js';
import { announceDemo, seedDemoOnFirstStart } from './demo-seed.js';
import { startMetricsServer } from './http/metrics.js';
import { LogDestination } from './log-destination.js';

/**
 * The process: configuration, database, listen, and an orderly shutdown.
 * Shutdown phases: stop accepting, let requests in flight finish (bounded by
 * SHUTDOWN_GRACE_MS), flush key last-used times, close pools, stop the
 * embedded PostgreSQL.
 */
async function startServer(config: Config) {
  const say = (msg: string) => process.stderr.write(`hds: ${msg}\n`);
  const db = await openDatabase(config, say, 'hds-server');

  const demo = await seedDemoOnFirstStart(db, config);

  const reads = new ReadRouter(db.sql, db.replicas.map((sql, i) => ({ sql, url: config.databaseReadUrls[i]! })));
  // Buffered log writes: one write per 64 KiB instead of a syscall per line on the request path. Synchronous
  // flushes keep memory bounded (an asynchronous queue grew by 100 MB under load when the disk fell behind).
  // Flushed every second and at shutdown; a crash can lose at most the last second's lines.
  const logDestination = new LogDestination(1);
  const logger = pino({ level: config.logLevel }, logDestination);
  // At low traffic the buffer may not fill for a long time: a line is never held back more than a second.
  const logFlushTimer = setInterval(() => logDestination.flush(), 1000);
  logFlushTimer.unref();
  const app = await buildApp({ config, sql: db.sql, reads, loggerInstance: logger });
  reads.onHealthChange = (change) => app.log.warn(change, 'read replica health changed');
  const flushTimer = setInterval(() => app.verifier.flushUses().catch((err) => app.log.warn({ err }, 'could not record key use')), 10_000);
  flushTimer.unref();

  await app.listen({ port: config.port, host: config.host });
  // METRICS_PORT: /metrics on its own listener (kept open until the end of shutdown), not on the API port.
  const metricsServer = config.metricsPort === undefined ? undefined
    : await startMetricsServer(app.metrics.registry, config.metricsPort, config.host);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  if (demo) {
    announceDemo(demo, port, say);
  }

  let stopping: Promise<void> | undefined;
  const shutdown = (signal: string) => {
    stopping ??= (async () => {
      say(`${signal}: shutting down (grace ${config.shutdownGraceMs} ms)`);
      // Requests get the grace period less a reserve (a quarter, at most 2 s) for flushing,
      // closing pools and stopping the embedded PostgreSQL: the whole exit fits in SHUTDOWN_GRACE_MS.
      const drainMs = config.shutdownGraceMs - Math.min(2000, Math.floor(config.shutdownGraceMs / 4));
      const force = setTimeout(() => {
        say('grace period over: closing remaining connections');
        app.server.closeAllConnections();
      }, drainMs);
      force.unref();
      try {
        await app.close();
        clearInterval(flushTimer);
        await app.verifier.flushUses().catch(() => {});
      } finally {
        clearTimeout(force);
        await metricsServer?.close();
        await reads.close();
        await db.close();
        clearInterval(logFlushTimer);
        logDestination.flushSync();
      }
    })();
    return stopping;
  };
  return { app, port, db, shutdown };
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`hds: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // WORKERS > 1: this process only supervises; each worker runs the rest of main().
  if (isClusterPrimary(config)) return runCluster(config);
  const server = await startServer(config);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      server.shutdown(signal).then(() => process.exit(0), (err) => {
        process.stderr.write(`hds: shutdown failed: ${err}\n`);
        process.exit(1);
      });
    });
  }
}

await main();

import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { buildApp, type App } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { openDatabase, type Database } from './db/database.js';
import { errorCode } from './db/errors.js';
import { logTransitions } from './db/freeze-guard.js';
import { ReadRouter } from './db/read-router.js';
import { isClusterPrimary, reportApiListening, runCluster } from './cluster.js';
import { announceDemo, seedDemoOnFirstStart } from './demo-seed.js';
import { startMetricsServer } from './http/metrics.js';
import { LogDestination } from './http/fast-path/log-destination.js';
import { purgeDeletedUsers, type PurgedUser } from './users/deletion.js';
import { compactSparseTeams } from './writes/team-state.js';
import { pruneEvents } from './events/claims.js';
import { DeliveryThread } from './events/delivery-thread.js';
import { registerDeliveryMetrics } from './events/metrics.js';

/**
 * The process: configuration, database, listen, and an orderly shutdown.
 * Shutdown phases: stop accepting and stop claiming webhook messages, let
 * requests and delivery attempts in flight finish (bounded by
 * SHUTDOWN_GRACE_MS) and end the delivery thread, flush key last-used times,
 * close pools, stop the embedded PostgreSQL.
 */
async function startServer(config: Config) {
  const say = (msg: string) => process.stderr.write(`hds: ${msg}\n`);
  // The freeze guard: requests get a 503 within two seconds even when the primary stops answering altogether.
  const applicationName = 'hds-server';
  const db = await openDatabase(config, say, applicationName, {
    freezeGuard: { frozenAfterMs: config.dbFreezeTimeoutMs, checkIntervalMs: Math.min(250, Math.floor(config.dbFreezeTimeoutMs / 4)) },
  });

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
  const app = await buildApp({ config, sql: db.sql, reads, freezeGuard: db.guard, loggerInstance: logger });
  reads.onHealthChange = (change) => app.log.warn(change, 'read replica health changed');
  reads.onReadFailed = (failure) => app.log.warn(failure, 'read failed on a replica: re-run on the primary');
  if (db.guard) logTransitions(db.guard, app.log);
  const flushUses = () => Promise.all([app.verifier.flushUses(), app.managementVerifier.flushUses()]);
  const flushTimer = setInterval(() => flushUses().catch((err) => app.log.warn({ err }, 'could not record key use')), 10_000);
  flushTimer.unref();
  const purgeTimer = schedulePurges(db.sql, config, app.log);
  // Webhook delivery, in every process, on a thread and a pool of its own (src/events/delivery-thread.ts):
  // off the requests' event loop. Attempts of any instance are claimed once.
  const delivery = await DeliveryThread.start({
    url: db.url, config, applicationName, writeLog: (line) => logDestination.write(line), log: app.log,
  });
  registerDeliveryMetrics(app.metrics.registry, db.sql, delivery.stats);

  await app.listen({ port: config.port, host: config.host });
  // /metrics on its own listener (kept open until the end of shutdown), never on the API port.
  const metricsServer = await startMetricsServer(app.metrics, config.metricsPort, config.metricsHost);
  say(`metrics on http://${formatAddress(metricsServer.server.address())}/metrics`);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  reportApiListening(port);
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
      const stopDelivery = async () => {
        say(`stopping webhook delivery (attempts in flight get up to ${drainMs} ms)`);
        await delivery.stop(drainMs);
        say('webhook delivery stopped');
      };
      try {
        // Delivery stops claiming at once; its attempts in flight get the requests' time. Its pool is
        // closed before the embedded PostgreSQL stops.
        await Promise.all([app.close(), stopDelivery()]);
        clearInterval(flushTimer);
        clearInterval(purgeTimer);
        await flushUses().catch(() => {});
      } finally {
        clearTimeout(force);
        await metricsServer.close();
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

function formatAddress(address: string | AddressInfo | null): string {
  if (!address || typeof address === 'string') return String(address);
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`;
}

/** How often each process looks for deleted users past the grace period (passes run one at a time across instances). */
const PURGE_EVERY_MS = 60_000;

/**
 * Purges deleted users past DELETION_GRACE now and every minute, logging each one purged (never a key: the deleting
 * key's id); then deletes the events past EVENT_RETENTION.
 */
function schedulePurges(sql: Database['sql'], config: Config, log: App['log']): NodeJS.Timeout {
  let running = false;
  const logPurged = (users: PurgedUser[]) => {
    for (const u of users) log.info({ team_id: u.team_id, user_id: u.user_id, key_id: u.deleted_by_key }, 'user purged');
  };
  const pass = () => {
    if (running) return;
    running = true;
    purgeDeletedUsers(sql, config.deletionGraceMs, logPurged)
      .catch((err) => log.warn({ err: { code: errorCode(err), message: (err as Error).message } }, 'could not purge deleted users'))
      // Teams whose purged users left too many holes in their positions are renumbered.
      .then(() => compactSparseTeams(sql))
      .then((teams) => { for (const teamId of teams) log.info({ team_id: teamId }, 'team positions compacted'); })
      .catch((err) => log.warn({ err: { code: errorCode(err), message: (err as Error).message } }, 'could not compact team positions'))
      // Events past EVENT_RETENTION, with their messages.
      .then(() => pruneEvents(sql, config.eventRetentionMs))
      .catch((err) => log.warn({ err: { code: errorCode(err), message: (err as Error).message } }, 'could not prune old events'))
      .finally(() => { running = false; });
  };
  pass();
  const timer = setInterval(pass, PURGE_EVERY_MS);
  timer.unref();
  return timer;
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

import Fastify, { type FastifyInstance, type FastifyReply, type FastifySchema } from 'fastify';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestStats } from './request-stats.js';
import { routePattern } from './route-pattern.js';
import type { KeyVerifier } from '../auth/key-verifier.js';
import type { Sql } from '../db/client.js';
import type { PageCache } from '../users/page-cache.js';

export interface AppMetrics {
  registry: Registry;
  /** Incremented by the rate limiter for every 429 it answers; `scope` is what ran out (team, ip). */
  rateLimitRejections: Counter<'scope'>;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: AppMetrics;
  }
}

export interface MetricsDeps {
  sql: Sql;
  verifier: KeyVerifier;
  pages: PageCache;
  poolMax: number;
  /** Serve /metrics on the app's own port (false when METRICS_PORT moves it to its own server). */
  serveOnAppPort: boolean;
}

const HIDDEN = { hide: true } as FastifySchema;

/**
 * Prometheus metrics for one app. A registry per app, not prom-client's
 * global one, so tests can build several apps in one process.
 * Registered on the root instance (not encapsulated) so that its hook sees
 * every request and `app.metrics` is visible to every plugin.
 */
export function registerMetrics(app: FastifyInstance, deps: MetricsDeps): AppMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new RequestStats();
  requests.register(registry);
  const rateLimitRejections = new Counter({
    name: 'hds_rate_limit_rejections_total', help: 'Requests refused with 429, by limit scope',
    labelNames: ['scope'] as const, registers: [registry],
  });
  mirrorCounter(registry, 'hds_key_verifications_total', 'API key verifications, by result', 'result', () => ({
    accepted: deps.verifier.accepted, rejected: deps.verifier.rejected,
  }));
  mirrorCounter(registry, 'hds_key_lookups_total', 'API key database lookups (key cache misses)', 'source', () => ({
    database: deps.verifier.lookups,
  }));
  mirrorCounter(registry, 'hds_list_pages_total', 'List pages answered, by where the page came from', 'source', () => ({
    memory: deps.pages.hits, database: deps.pages.misses,
  }));
  registerPoolGauges(registry, deps.sql, deps.poolMax);

  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, never the raw URL: ids in paths would explode the label set.
    requests.record(request.method, routePattern(request) ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  const metrics: AppMetrics = { registry, rateLimitRejections };
  app.decorate('metrics', metrics);
  if (deps.serveOnAppPort) app.get('/metrics', { schema: HIDDEN }, (_req, reply) => sendMetrics(registry, reply));
  return metrics;
}

async function sendMetrics(registry: Registry, reply: FastifyReply) {
  return reply.type(registry.contentType).send(await registry.metrics());
}

/** A counter whose value is read, at scrape time, from a plain number kept elsewhere. */
function mirrorCounter(registry: Registry, name: string, help: string, label: string, read: () => Record<string, number>): void {
  new Counter({
    name, help, labelNames: [label], registers: [registry],
    collect() {
      this.reset();
      for (const [value, count] of Object.entries(read())) this.inc({ [label]: value }, count);
    },
  });
}

/**
 * The `postgres` driver does not expose its pool, so connection use is read
 * from pg_stat_activity at scrape time: the sessions of this pool's
 * application_name (the scrape's own query counts as one active session).
 */
function registerPoolGauges(registry: Registry, sql: Sql, poolMax: number): void {
  // One query per scrape, shared by the gauges below (prom-client collects them concurrently).
  let inflight: Promise<{ state: string; n: number }[] | undefined> | undefined;
  const sessions = () => {
    inflight ??= sql<{ state: string; n: number }[]>`
      SELECT coalesce(state, 'unknown') AS state, count(*)::int AS n
      FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = current_setting('application_name')
      GROUP BY 1`
      .then((rows) => [...rows], () => undefined)
      .finally(() => { inflight = undefined; });
    return inflight;
  };
  new Gauge({ name: 'hds_db_pool_max_connections', help: 'Configured size of the primary pool (DB_POOL_MAX)', registers: [registry] }).set(poolMax);
  new Gauge({
    name: 'hds_db_up', help: '1 when the database answered during this scrape', registers: [registry],
    async collect() { this.set((await sessions()) ? 1 : 0); },
  });
  new Gauge({
    name: 'hds_db_connections', help: 'Database sessions of this service by state (pg_stat_activity, same application_name)',
    labelNames: ['state'] as const, registers: [registry],
    async collect() {
      this.reset();
      for (const row of (await sessions()) ?? []) this.set({ state: row.state }, row.n);
    },
  });
}

/** A separate listener for /metrics when METRICS_PORT is set, so it need not be exposed with the API. */
export async function startMetricsServer(registry: Registry, port: number, host: string): Promise<FastifyInstance> {
  const server = Fastify({ logger: false });
  server.get('/metrics', (_req, reply) => sendMetrics(registry, reply));
  await server.listen({ port, host });
  return server;
}

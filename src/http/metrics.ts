import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestStats } from './fast-path/request-stats.js';
import { routePattern } from './fast-path/route-pattern.js';
import type { Sql } from '../db/client.js';
import type { FreezeStats } from '../db/freeze-guard.js';

export interface AppMetrics {
  registry: Registry;
  /** The whole exposition text: the registry's metrics and the request counts (./fast-path/request-stats.ts). */
  render(): Promise<string>;
  /** Counts an answer that no route's hooks saw (the HTTP parser's and the router's refusals, src/http/edge-answers.ts). */
  recordRequest(method: string, route: string, status: number, seconds: number): void;
  /** Incremented by the rate limiter for every 429 it answers; `scope` is what ran out (ip, team, auth). */
  rateLimitRejections: Counter<'scope'>;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: AppMetrics;
  }
}

export interface MetricsDeps {
  sql: Sql;
  /** Key verifications and their database lookups (src/auth/key-verifier.ts). */
  keys: { accepted: number; rejected: number; lookups: number };
  /** List pages answered from memory and from the database (src/users/reads.ts). */
  pages: { hits: number; misses: number };
  /** Pages of teams with holes read from the database, by where their start came from (src/users/hole-copies.ts). */
  holeStarts: { copied: number; computed: number };
  poolMax: number;
  /** The primary's freeze guard (src/db/freeze-guard.ts), where the process runs one (the server does). */
  freezeGuard?: { stats(): FreezeStats } | undefined;
}

/** How long a rendering of the metrics is served again. */
const RENDER_EVERY_MS = 1000;

/**
 * Prometheus metrics for one app. A registry per app, not prom-client's
 * global one, so tests can build several apps in one process.
 * Registered on the root instance (not encapsulated) so that its hook sees
 * every request and `app.metrics` is visible to every plugin. They are served
 * by a listener of their own (startMetricsServer), never on the API's port.
 */
export function registerMetrics(app: FastifyInstance, deps: MetricsDeps): AppMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new RequestStats();
  const rateLimitRejections = new Counter({
    name: 'hds_rate_limit_rejections_total', help: 'Requests refused with 429, by limit scope',
    labelNames: ['scope'] as const, registers: [registry],
  });
  mirrorCounter(registry, 'hds_key_verifications_total', 'API key verifications, by result', 'result', () => ({
    accepted: deps.keys.accepted, rejected: deps.keys.rejected,
  }));
  mirrorCounter(registry, 'hds_key_lookups_total', 'API key database lookups (key cache misses)', 'source', () => ({
    database: deps.keys.lookups,
  }));
  mirrorCounter(registry, 'hds_list_pages_total', 'List pages answered, by where the page came from', 'source', () => ({
    memory: deps.pages.hits, database: deps.pages.misses,
  }));
  mirrorCounter(registry, 'hds_list_hole_starts_total', 'List pages of teams with holes read from the database, by where their start came from', 'source', () => ({
    copy: deps.holeStarts.copied, database: deps.holeStarts.computed,
  }));
  registerPoolGauges(registry, deps.sql, deps.poolMax);
  if (deps.freezeGuard) registerFreezeGuard(registry, deps.freezeGuard);

  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, never the raw URL: ids in paths would explode the label set.
    requests.record(request.method, routePattern(request) ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  const metrics: AppMetrics = {
    registry, rateLimitRejections,
    render: async () => `${await registry.metrics()}\n${requests.render()}`,
    recordRequest: (method, route, status, seconds) => requests.record(method, route, status, seconds),
  };
  app.decorate('metrics', metrics);
  return metrics;
}

/**
 * `render`, done at most once a second: a flood of scrapes costs the API no
 * more than one rendering a second (concurrent scrapes share one).
 * Decision: docs/decisions/metrics-rendered-once-a-second.md
 */
export function renderedAtMostEverySecond(render: () => Promise<string>): () => Promise<string> {
  let last: { at: number; text: Promise<string> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= RENDER_EVERY_MS) {
      const text = render();
      // A failed rendering is not kept: the next scrape tries again.
      text.catch(() => { if (last?.text === text) last = undefined; });
      last = { at: now, text };
    }
    return last.text;
  };
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

/** The freeze guard's state and counts, read at scrape time: an operator sees a freeze, and how many requests it refused. */
function registerFreezeGuard(registry: Registry, guard: { stats(): FreezeStats }): void {
  const read = <K extends keyof FreezeStats>(key: K) => guard.stats()[key];
  const gauge = (name: string, help: string, value: () => number) =>
    new Gauge({ name, help, registers: [registry], collect() { this.set(value()); } });
  const counter = (name: string, help: string, value: () => number) =>
    new Counter({ name, help, registers: [registry], collect() { this.reset(); this.inc(value()); } });
  gauge('hds_db_frozen', '1 while the primary is taken as frozen (not answering at all) and its queries fail at once', () => (read('frozen') ? 1 : 0));
  counter('hds_db_freezes_total', 'Times the primary was taken as frozen', () => read('freezes'));
  counter('hds_db_frozen_refusals_total', 'Queries and transactions failed at once (503) because the primary was frozen', () => read('refused'));
  gauge('hds_db_frozen_unanswered', 'Queries abandoned during a freeze that the primary has not answered yet (each holds a connection)', () => read('unanswered'));
  counter('hds_db_probe_connections_total', 'Connections the freeze guard\'s probe has opened (one more each time it gave up on one)', () => read('probeConnections'));
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

/**
 * The listener of /metrics (METRICS_HOST:METRICS_PORT, the loopback by
 * default): apart from the API, which never serves it, so that it is neither
 * public nor in the way of the API's answers.
 */
export async function startMetricsServer(metrics: AppMetrics, port: number, host: string): Promise<FastifyInstance> {
  const server = Fastify({ logger: false });
  const render = renderedAtMostEverySecond(metrics.render);
  server.get('/metrics', async (_req, reply: FastifyReply) => reply.type(metrics.registry.contentType).send(await render()));
  await server.listen({ port, host });
  return server;
}

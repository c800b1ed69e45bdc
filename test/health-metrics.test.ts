import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import postgres from 'postgres';
import { connect, type Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { renderedAtMostEverySecond, startMetricsServer } from '../src/http/metrics.js';
import { databaseUrl, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

interface Sample { name: string; labels: Record<string, string>; value: number }

/** Prometheus text format, samples only (comments skipped). */
function parseMetrics(text: string): Sample[] {
  return text.split('\n').filter((l) => l && !l.startsWith('#')).map((line) => {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    return { name: m[1]!, labels, value: Number(m[3]) };
  });
}

function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.reduce((sum, s) => sum + s.value, 0);
}

/** A pool that can never connect: port 1 on loopback refuses at once. */
const unreachableSql = () => connect('postgres://postgres@127.0.0.1:1/none', { max: 1, connectTimeoutS: 1 });

describe('health probes', () => {
  let sql: Sql;
  let app: App;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('/healthz and /readyz answer 200 without a key when the database is up and current', async () => {
    const health = await app.inject({ url: '/healthz' });
    assert.equal(health.statusCode, 200);
    assert.deepEqual(health.json(), { status: 'ok' });
    const ready = await app.inject({ url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json(), { status: 'ready' });
  });

  it('with the database unreachable: /healthz stays 200, /readyz is 503 with Retry-After', async () => {
    const down = unreachableSql();
    const downApp = await testApp(down);
    try {
      assert.equal((await downApp.inject({ url: '/healthz' })).statusCode, 200);
      const ready = await downApp.inject({ url: '/readyz' });
      assert.equal(ready.statusCode, 503);
      assert.deepEqual(ready.json(), { detail: 'Service Unavailable' });
      assert.ok(Number(ready.headers['retry-after']) >= 1);
    } finally {
      await downApp.close();
      await down.end({ timeout: 0 });
    }
  });

  it('/readyz is 503 when the migrations are not applied', async () => {
    // A session whose search_path is an empty schema sees no schema_migrations: a database never migrated.
    const schema = `readyz_empty_${randomInt(1e9)}`;
    await sql.unsafe(`CREATE SCHEMA ${schema}`);
    const bare = postgres(databaseUrl(), { max: 1, onnotice: () => {}, connection: { search_path: schema } });
    const bareApp = await testApp(bare as unknown as Sql);
    try {
      assert.equal((await bareApp.inject({ url: '/readyz' })).statusCode, 503);
      // Same pool once the table exists but lacks the latest version: still not ready.
      await bare.unsafe('CREATE TABLE schema_migrations (version int PRIMARY KEY, name text NOT NULL)');
      assert.equal((await bareApp.inject({ url: '/readyz' })).statusCode, 503);
      await bare.unsafe(`INSERT INTO schema_migrations SELECT version, name FROM public.schema_migrations`);
      assert.equal((await bareApp.inject({ url: '/readyz' })).statusCode, 200);
    } finally {
      await bareApp.close();
      await bare.end();
      await sql.unsafe(`DROP SCHEMA ${schema} CASCADE`);
    }
  });
});

describe('/metrics', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;

  /** The app's metrics as its listener renders them, fresh (the listener serves a rendering for a second). */
  const scrape = async (target: App = app) => parseMetrics(await target.metrics.render());

  before(async () => {
    sql = testSql();
    app = await testApp(sql, { DB_POOL_MAX: '7' });
    team = await teamWithUsers(sql, 3);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('counts requests and latency by route pattern and status, never by raw URL', async () => {
    const before = await scrape();
    const route = { route: '/v2/user/:user_id', status: '200', method: 'GET' };
    const n = 4;
    for (let i = 0; i < n; i++) {
      const res = await app.inject({ url: `/v2/user/${team.users[i % 3]!.user_id}`, headers: { 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 200);
    }
    await app.inject({ url: `/v2/user/${team.users[0]!.user_id}` });
    await app.inject({ url: '/no/such/path/1234' });
    const after = await scrape();
    assert.equal(valueOf(after, 'http_requests_total', route) - valueOf(before, 'http_requests_total', route), n);
    assert.equal(valueOf(after, 'http_request_duration_seconds_count', route) - valueOf(before, 'http_request_duration_seconds_count', route), n);
    assert.ok(valueOf(after, 'http_request_duration_seconds_sum', route) > 0);
    const buckets = after.filter((s) => s.name === 'http_request_duration_seconds_bucket' && Object.entries(route).every(([k, v]) => s.labels[k] === v));
    assert.equal(buckets.length, 14, '13 bounds and +Inf');
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]!.value >= buckets[i - 1]!.value, 'buckets are cumulative');
    assert.equal(buckets.at(-1)!.labels.le, '+Inf');
    assert.equal(buckets.at(-1)!.value, valueOf(after, 'http_request_duration_seconds_count', route));
    assert.equal(valueOf(after, 'http_requests_total', { route: '/v2/user/:user_id', status: '401' }) - valueOf(before, 'http_requests_total', { route: '/v2/user/:user_id', status: '401' }), 1);
    assert.equal(valueOf(after, 'http_requests_total', { route: 'unmatched', status: '404' }) - valueOf(before, 'http_requests_total', { route: 'unmatched', status: '404' }), 1);
    assert.ok(!after.some((s) => Object.values(s.labels).some((v) => v.includes(team.users[0]!.user_id) || v.includes('1234'))));
  });

  it('counts key verifications by result, and database lookups', async () => {
    const before = await scrape();
    await app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key } });
    await app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': 'hds_wrong' } });
    await app.inject({ url: '/v2/user/' });
    const after = await scrape();
    const delta = (labels: Record<string, string>) =>
      valueOf(after, 'hds_key_verifications_total', labels) - valueOf(before, 'hds_key_verifications_total', labels);
    assert.equal(delta({ result: 'accepted' }), 1);
    assert.equal(delta({ result: 'rejected' }), 2);
    assert.equal(valueOf(after, 'hds_key_lookups_total'), app.verifier.lookups);
    assert.ok(app.verifier.lookups >= 1);
  });

  it('exposes rate-limit rejections, database pool use and process memory', async () => {
    app.metrics.rateLimitRejections.inc({ scope: 'team' });
    const samples = await scrape();
    assert.equal(valueOf(samples, 'hds_rate_limit_rejections_total', { scope: 'team' }), 1);
    assert.equal(valueOf(samples, 'hds_db_pool_max_connections'), 7);
    assert.equal(valueOf(samples, 'hds_db_up'), 1);
    // The scrape's own query is an active session of the pool.
    assert.ok(valueOf(samples, 'hds_db_connections', { state: 'active' }) >= 1);
    assert.ok(valueOf(samples, 'process_resident_memory_bytes') > 0);
    assert.ok(valueOf(samples, 'nodejs_heap_size_used_bytes') > 0);
  });

  it('reports the database down instead of failing the scrape', async () => {
    const down = unreachableSql();
    const downApp = await testApp(down);
    try {
      const samples = await scrape(downApp);
      assert.equal(valueOf(samples, 'hds_db_up'), 0);
    } finally {
      await downApp.close();
      await down.end({ timeout: 0 });
    }
  });

  it('is served by a listener of its own, never on the API port', async () => {
    const separate = await testApp(sql);
    const server = await startMetricsServer(separate.metrics, 0, '127.0.0.1');
    try {
      const onApi = await separate.inject({ url: '/metrics' });
      assert.equal(onApi.statusCode, 404);
      assert.deepEqual(onApi.json(), { detail: 'Not Found' });
      await separate.inject({ url: '/healthz' });
      const address = server.server.address();
      assert.ok(address && typeof address === 'object');
      const res = await fetch(`http://127.0.0.1:${address.port}/metrics`);
      assert.equal(res.status, 200);
      assert.match(String(res.headers.get('content-type')), /^text\/plain; version=0\.0\.4/);
      const samples = parseMetrics(await res.text());
      assert.equal(valueOf(samples, 'http_requests_total', { route: '/healthz', status: '200' }), 1);
    } finally {
      await server.close();
      await separate.close();
    }
  });

  it('renders for the listener at most once a second, however often it is scraped', async () => {
    let renderings = 0;
    let clock = 0;
    const render = renderedAtMostEverySecond(async () => `rendering ${++renderings}`);
    const realNow = Date.now;
    Date.now = () => clock;
    try {
      clock = 10_000;
      const first = await Promise.all(Array.from({ length: 50 }, () => render()));
      assert.deepEqual(new Set(first), new Set(['rendering 1']), 'concurrent scrapes share one rendering');
      clock = 10_999;
      assert.equal(await render(), 'rendering 1');
      clock = 11_000;
      assert.equal(await render(), 'rendering 2');
      assert.equal(renderings, 2);
    } finally {
      Date.now = realNow;
    }
  });
});

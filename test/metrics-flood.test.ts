/**
 * A flood of scrapes cannot slow the API: /metrics is rendered at most once
 * a second for its listener. What the API pays is measured in rounds that
 * alternate between eight scrapers polling /metrics as fast as the issue's
 * (about 30 scrapes a second each) and the same scrapers polling a control
 * listener in this process that answers the same bytes from memory: the
 * scrapers' own cost, and what serving a scrape costs this process, are in
 * both, so the difference is what rendering the metrics costs the API.
 * (With the control in the scrapers' own process, this process's serving
 * cost was on one side only; it grows with a round's length, so the ratio
 * followed the machine's speed: 1.23-1.24x on a busy machine.)
 *
 * The measure is this process's CPU time per get-one (the app, its metrics
 * listener and the API's clients all run here; the scrapers do not), not
 * the get-ones' latency: the latency moved by a third when another program
 * loaded the shared machine during some of the rounds, the CPU time of the
 * work does not.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { startMetricsServer } from '../src/http/metrics.js';
import { teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

const ROUNDS = 10;
const WARM_UP_ROUNDS = 2;
const REQUESTS_PER_ROUND = 400;
/** Get-ones in flight at once: enough to keep the app busy, as under production load, where any CPU a scrape takes shows. */
const API_CLIENTS = 8;
const SCRAPERS = 8;
const SCRAPE_EVERY_MS = 33;

/** The scrapers' process: argv URL, count, interval; stops when its stdin closes and prints the scrapes answered with 200. */
const SCRAPERS_SCRIPT = `
const http = require('node:http');
const [metricsUrl, count, every] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(count) });
let running = true, ok = 0;
process.stdin.on('end', () => { running = false; }).resume();
// http.get with the body discarded: the scrapers should cost this machine as little as a Prometheus would.
const scrape = (url) => new Promise((resolve) => http.get(url, { agent }, (res) => {
  if (res.statusCode === 200) ok++;
  res.resume().on('end', resolve);
}).on('error', resolve));
const scraper = async (url) => {
  while (running) {
    const started = performance.now();
    await scrape(url);
    const wait = Number(every) - (performance.now() - started);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
};
Promise.all(Array.from({ length: Number(count) }, () => scraper(metricsUrl)))
  .then(() => { process.stdout.write(String(ok)); agent.destroy(); process.exit(0); });
`;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe('/metrics under a flood of scrapes', () => {
  let sql: Sql;
  let app: App;
  let metrics: FastifyInstance;
  let control: FastifyInstance;
  let team: TeamWithUsers;
  let api: string;
  let scrapeUrl: string;
  let controlUrl: string;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    team = await teamWithUsers(sql, 20);
    await app.listen({ port: 0, host: '127.0.0.1' });
    api = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    metrics = await startMetricsServer(app.metrics, 0, '127.0.0.1');
    scrapeUrl = `http://127.0.0.1:${(metrics.server.address() as AddressInfo).port}/metrics`;
    // The control: a listener like the metrics one, answering what /metrics answered, from memory.
    const scraped = await fetch(scrapeUrl);
    const [type, body] = [scraped.headers.get('content-type')!, Buffer.from(await scraped.arrayBuffer())];
    control = Fastify({ logger: false });
    control.get('/metrics', async (_req, reply) => reply.type(type).send(body));
    await control.listen({ port: 0, host: '127.0.0.1' });
    controlUrl = `http://127.0.0.1:${(control.server.address() as AddressInfo).port}/metrics`;
  });
  after(async () => {
    await control.close();
    await metrics.close();
    await app.close();
    await sql.end();
  });

  /** This process's CPU time per get-one, in µs, over a round of API_CLIENTS clients sending get-ones one after the other. */
  async function round(): Promise<number> {
    const cpu = process.cpuUsage();
    const client = async (first: number) => {
      for (let i = first; i < REQUESTS_PER_ROUND; i += API_CLIENTS) {
        const user = team.users[i % team.users.length]!;
        const res = await fetch(`${api}/v2/user/${user.user_id}`, { headers: { 'x-service-api-key': team.key } });
        await res.arrayBuffer();
        assert.equal(res.status, 200);
      }
    };
    await Promise.all(Array.from({ length: API_CLIENTS }, (_, i) => client(i)));
    const used = process.cpuUsage(cpu);
    return (used.user + used.system) / REQUESTS_PER_ROUND;
  }

  /**
   * Eight scrapers, each polling every SCRAPE_EVERY_MS, in a process of their
   * own (in this one they would take this event loop from the app), until
   * the returned stop is called; resolves to the scrapes answered with 200.
   */
  function flood(target: 'metrics' | 'control'): () => Promise<number> {
    const args = [target === 'metrics' ? scrapeUrl : controlUrl, String(SCRAPERS), String(SCRAPE_EVERY_MS)];
    const child = spawn(process.execPath, ['-e', SCRAPERS_SCRIPT, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    return async () => {
      child.stdin.end();
      await exited;
      return Number(out.trim());
    };
  }

  it('keeps what a get-one costs within 20% of its cost without the flood', async () => {
    const quiet: number[] = [];
    const flooded: number[] = [];
    let scrapes = 0;
    /** A round beside `target`'s flood; counted unless a warm-up one. */
    const measure = async (target: 'metrics' | 'control', counted = true) => {
      const stop = flood(target);
      const cost = await round();
      const scraped = await stop();
      if (!counted) return;
      (target === 'metrics' ? flooded : quiet).push(cost);
      if (target === 'metrics') scrapes += scraped;
    };
    // Warm-up (the JIT, the pool, the key cache, both listeners): the first rounds cost up to twice the later ones.
    for (let i = 0; i < WARM_UP_ROUNDS; i++) {
      await measure('control', false);
      await measure('metrics', false);
    }
    // Each pair in the other order than the last (control first, then the flood first): a drift in the
    // process's cost over the run (the JIT, the heap growing) weighs on both sides alike.
    for (let i = 0; i < ROUNDS; i++) {
      const order = i % 2 === 0 ? (['control', 'metrics'] as const) : (['metrics', 'control'] as const);
      for (const target of order) await measure(target);
    }
    assert.ok(scrapes > ROUNDS * SCRAPERS, `the flood scraped (${scrapes} times)`);
    const ratio = median(flooded) / median(quiet);
    assert.ok(ratio <= 1.2, `median CPU per get-one ${median(flooded).toFixed(0)} µs with the flood, ${median(quiet).toFixed(0)} µs without (${ratio.toFixed(2)}x)`);
  });
});

/**
 * The webhook scenarios of issue 29 (`npx tsx bench/webhooks.ts`; `--help`),
 * against the built service (dist/server.js) on a fresh database
 * `hds_bench_webhooks` of DATABASE_URL's server (default
 * postgres://postgres@127.0.0.1:5432; only that name is ever dropped), with
 * one endpoint registered for the team, on a receiver in this process that
 * answers 204 at once:
 *
 * 1. `writes-with-endpoint`: patch, delete-undo and create, as bench/scenarios.ts
 *    runs them (8 connections), each change now recording its event and its
 *    message: ≥ 1,000/s each with p99 ≤ 20 ms. Beside each, its anchor: the
 *    service's own functions for it called from here on 8 connections, with
 *    no HTTP (the same statements and commits).
 * 2. `delivery-rate`: creates at 32 connections (64 users a statement at
 *    most, so more events than one endpoint takes); the receiver's rate over
 *    the load: ≥ 2,000 events/s.
 * 3. `commit-to-receiver`: 500 creates a second, paced; for each, from the
 *    answer's arrival (after the commit) and from the request's start
 *    (before it) to the delivery's arrival: p50 ≤ 50 ms, p99 ≤ 250 ms on
 *    the latter (the conservative one).
 * 4. `backlog-drain`: with the service stopped, 100,000 events and their
 *    failed messages written in SQL; the service started and the endpoint
 *    recovered (POST …/recover): drained at ≥ 2,000 events/s.
 * 5. `reads-while-events-flow`: get-one and list-first beside 500 creates a
 *    second, with the endpoint disabled and then enabled, each beside its
 *    PostgreSQL anchor under the same creates: the service's ratio to its
 *    anchor with the events delivered within 10% of its ratio without.
 *
 * `--runs 3` (the default) repeats all and prints the medians, as the issue
 * asks; the figures go to bench/results/webhooks-latest.json. Run it on a
 * quiet machine: it measures, it does not judge a shared one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { issueKey, issueManagementKey } from '../src/auth/issue-key.js';
import { connect, type Sql } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { findOrg } from '../src/management/org.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { createTeam } from '../src/teams/team-store.js';
import type { AnchorChildSpec } from './anchor-child.js';
import { freshDatabase } from './database.js';
import { readIds } from './dataset.js';
import { Inbox } from './inbox.js';
import { runLoad, type LoadGenerator } from './load.js';
import { quantile } from './timed-loop.js';
import { runWriteAnchor, type WriteKind, type WriteTeam } from './write-anchor.js';
import type { LoadResult, PathPlan } from './load-plan.js';
import { onPath, runBenchChild, runToEnd, stopAll } from './processes.js';
import { KEY_HEADER, ZONES } from './scenarios.js';
import { startService, stopService, type Service } from './service.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const workDir = path.join(root, 'bench', '.work', 'webhooks');
const DATABASE = 'hds_bench_webhooks';
const WRITE_CONNECTIONS = 8;
const READ_CONNECTIONS = 32;
const POOL = 2000;
/** The anchors' warm-up, as the load generator's (`warmup: 2` below). */
const WARMUP_MS = 2000;
const TARGETS = { writesPerSec: 1000, writeP99Ms: 20, deliveriesPerSec: 2000, latencyP50Ms: 50, latencyP99Ms: 250, drainPerSec: 2000, readsWithin: 0.1 };

const { values: args } = parseArgs({
  options: {
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    duration: { type: 'string', default: '10' },
    runs: { type: 'string', default: '3' },
    backlog: { type: 'string', default: '100000' },
    'no-build': { type: 'boolean', default: false },
    only: { type: 'string', default: 'writes,delivery,latency,reads,drain' },
    profile: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write('npx tsx bench/webhooks.ts [--database-url URL] [--duration S] [--runs N] [--backlog N] [--no-build]\n'
    + '  [--only writes,delivery,latency,reads,drain]   the scenarios to run (default: all)\n'
    + '  [--profile]   V8 CPU profiles of the service (node --cpu-prof) in bench/.work/webhooks\n');
  process.exit(0);
}
const duration = Number(args.duration);
const only = new Set(args.only.split(','));
const say = (msg: string) => process.stderr.write(`bench/webhooks: ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Setup { sql: Sql; url: string; key: string; keyId: string; teamId: string; webhookId: string; managementKey: string; orgId: string; inbox: Inbox }

/** A fresh database with a team, its key, a management key, and one endpoint on the receiver. */
async function setUp(): Promise<Setup> {
  const url = await freshDatabase(args['database-url'], DATABASE);
  const sql = connect(url, { max: 4 });
  await migrate(sql);
  const teamId = await createTeam(sql, 'bench webhooks');
  const { key, keyId } = await issueKey(sql, teamId, 'bench');
  const { key: managementKey } = await issueManagementKey(sql, 'bench');
  const orgId = (await findOrg(sql)).id;
  const inbox = new Inbox();
  const saved = await registerWebhook(sql, teamId, { url: await inbox.listen() }, { allowPrivate: true });
  if (typeof saved !== 'object' || !('webhook' in saved)) throw new Error('could not register the endpoint');
  return { sql, url, key, keyId, teamId, webhookId: saved.webhook.id, managementKey, orgId, inbox };
}

function start(s: Setup, name: string): Promise<Service> {
  return startService({
    root, target: { databaseUrl: s.url }, logFile: path.join(workDir, `${name}.log`),
    // Keep-alive past the load's idle gaps: with the default, the load saw "other side closed" errors.
    extraEnv: { WEBHOOK_ALLOW_PRIVATE: 'true', DEMO_SEED: 'false', KEEP_ALIVE_TIMEOUT_MS: '30000' },
    ...(args.profile ? { profileDir: workDir } : {}),
  });
}

/** wrk where it is installed, as `npm run bench` chooses: autocannon, a Node process, takes a share of the 2 cores the service needs. */
const generator: LoadGenerator = onPath('wrk') ? 'wrk' : 'autocannon';
const load = (service: Service, plan: PathPlan, connections: number) =>
  runLoad(root, workDir, generator, { url: service.baseUrl, connections, duration, warmup: 2, plan });

/** `count` users created through the API, their ids one per line in a file (the patch and delete-undo pools). */
async function pool(service: Service, s: Setup, count: number): Promise<string> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, count - i) }, async (_, j) => {
      const res = await fetch(`${service.baseUrl}/v2/user/`, {
        method: 'POST', headers: { [KEY_HEADER]: s.key, 'content-type': 'application/json' },
        body: JSON.stringify({ client_user_id: `pool-${i + j}-${Date.now()}` }),
      });
      ids.push(((await res.json()) as { user_id: string }).user_id);
    }));
  }
  const file = path.join(workDir, 'pool.txt');
  fs.writeFileSync(file, ids.join('\n') + '\n');
  return file;
}

async function writesWithEndpoint(service: Service, s: Setup, poolFile: string): Promise<Record<WriteKind, { service: LoadResult; database: LoadResult }>> {
  const big = { [KEY_HEADER]: s.key };
  const json = { ...big, 'content-type': 'application/json' };
  const bodies = ZONES.map((zone) => JSON.stringify({ fallback_time_zone: zone }));
  const plans: Record<WriteKind, PathPlan> = {
    patch: { kind: 'random-line', method: 'PATCH', prefix: '/v2/user/', file: poolFile, headers: json, bodies },
    'delete-undo': { kind: 'delete-undo', file: poolFile, headers: big },
    create: { kind: 'create', path: '/v2/user/', clientUserIdPrefix: 'bench-', headers: json },
  };
  const team: WriteTeam = { teamId: s.teamId, keyId: s.keyId, ids: readIds(poolFile), zones: ZONES, clientUserIdPrefix: 'bench-' };
  const out = {} as Record<WriteKind, { service: LoadResult; database: LoadResult }>;
  for (const [kind, plan] of Object.entries(plans) as [WriteKind, PathPlan][]) {
    // Each starts on no backlog: the events of the one before are not delivered during it.
    await settle(s);
    const served = await load(service, plan, WRITE_CONNECTIONS);
    await settle(s);
    // Its anchor (bench/write-anchor.ts); the service's dispatcher delivers their events meanwhile, as it does the served writes'.
    out[kind] = { service: served, database: await runWriteAnchor(s.url, kind, team, WRITE_CONNECTIONS, WARMUP_MS, duration) };
  }
  return out;
}

/** Deliveries a second while creates run at 32 connections: the events of the load's seconds over those seconds. */
async function deliveryRate(service: Service, s: Setup): Promise<{ creates: number; deliveries: number }> {
  const before = s.inbox.arrivals.size;
  const result = await load(service, { kind: 'create', path: '/v2/user/', clientUserIdPrefix: 'rate-', headers: { [KEY_HEADER]: s.key, 'content-type': 'application/json' } }, 32);
  const ended = performance.timeOrigin + performance.now();
  // The load's measured seconds are its last `duration` (after the warm-up).
  const inWindow = [...s.inbox.arrivals.values()].slice(before).filter((a) => a.at >= ended - duration * 1000 && a.at <= ended).length;
  return { creates: result.requestsPerSec, deliveries: inWindow / duration };
}

/**
 * Waits until the receiver has every message of the team's endpoint (what a
 * load left behind), so that the next scenario starts on no backlog; returns
 * how long that took, in seconds.
 */
async function settle(s: Setup): Promise<number> {
  const started = performance.now();
  const [row] = await s.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_messages WHERE endpoint_id = ${s.webhookId}`;
  await s.inbox.until(row!.n, 600_000);
  return (performance.now() - started) / 1000;
}

/** 500 creates a second for the run's duration; per event, request start → arrival and answer → arrival. */
async function commitToReceiver(service: Service, s: Setup, perSec = 500): Promise<{ fromRequest: number[]; fromAnswer: number[]; sent: number }> {
  const sentAt = new Map<string, { request: number; answer: number }>();
  const total = perSec * duration;
  const stamps: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    // Paced by the clock: request i leaves at i / perSec seconds.
    const wait = start + (i * 1000) / perSec - performance.now();
    if (wait > 1) await sleep(wait);
    const request = performance.timeOrigin + performance.now();
    stamps.push(fetch(`${service.baseUrl}/v2/user/`, {
      method: 'POST', headers: { [KEY_HEADER]: s.key, 'content-type': 'application/json' },
      body: JSON.stringify({ client_user_id: `latency-${i}-${request}` }),
    }).then(async (res) => {
      const answer = performance.timeOrigin + performance.now();
      sentAt.set(((await res.json()) as { user_id: string }).user_id, { request, answer });
    }));
  }
  await Promise.all(stamps);
  await sleep(2000);
  const fromRequest: number[] = [];
  const fromAnswer: number[] = [];
  for (const arrival of s.inbox.arrivals.values()) {
    const sent = sentAt.get(arrival.userId);
    if (!sent) continue;
    fromRequest.push(arrival.at - sent.request);
    fromAnswer.push(Math.max(0, arrival.at - sent.answer));
  }
  return { fromRequest, fromAnswer, sent: total };
}

/** `count` events of the team and their failed messages, written in SQL while no service runs. */
async function writeBacklog(s: Setup, count: number): Promise<void> {
  await s.sql`
    WITH e AS (
      INSERT INTO events (team_id, user_id, event_type, body)
      SELECT ${s.teamId}, gen_random_uuid(), 'user.updated',
        '{"event_type":"user.updated","data":{"n":' || g || '},"user_id":"00000000-0000-0000-0000-000000000000","client_user_id":"backlog","team_id":"' || ${s.teamId} || '"}'
      FROM generate_series(1, ${count}) g
      RETURNING event_id, created_at
    )
    INSERT INTO webhook_messages (event_id, endpoint_id, created_at, status, attempts, last_status_code)
    SELECT event_id, ${s.webhookId}, created_at, 'failed', 8, 503 FROM e`;
}

async function backlogDrain(service: Service, s: Setup, count: number): Promise<number> {
  const before = s.inbox.arrivals.size;
  const started = performance.timeOrigin + performance.now();
  const res = await fetch(`${service.baseUrl}/v1/org/${s.orgId}/team/${s.teamId}/production/webhook/${s.webhookId}/recover`, {
    method: 'POST', headers: { 'x-management-key': s.managementKey, 'content-type': 'application/json' },
    body: JSON.stringify({ since: '2000-01-01T00:00:00Z' }),
  });
  if (res.status !== 202) throw new Error(`recover answered ${res.status}`);
  const last = await s.inbox.until(before + count, 600_000);
  return count / ((last - started) / 1000);
}

/** A read's rates beside 500 creates a second: the service's, and its anchor's, without events and with them delivered. */
interface ReadsBeside { alone: number; service: { noEvents: number; withEvents: number }; anchor: { noEvents: number; withEvents: number } }

/**
 * get-one and list-first beside 500 creates a second, with the endpoint
 * disabled (the changes make no messages) and then enabled (each change's
 * event is delivered); beside each, its anchor under the same creates:
 * PostgreSQL's own lookups (the user's document by team and id) and the
 * page statement (both bench/anchor.ts), on as many connections. The target is
 * the service's ratio to its anchor, with the events against without: the
 * CPU that delivering takes from a shared machine slows both sides, and
 * what is left is what the events cost the service's reads. (The creates
 * alone already move list-first: each raises the team's version, and the
 * page is answered again.)
 */
async function readsWhileEventsFlow(service: Service, s: Setup, poolFile: string): Promise<Record<string, ReadsBeside>> {
  const big = { [KEY_HEADER]: s.key };
  // In a process of its own: this one receives the deliveries and paces the creates meanwhile (bench/anchor-child.ts).
  const anchor = async (statement: AnchorChildSpec['statement']) => (await runBenchChild<LoadResult>('anchor', root, workDir, 'anchor-child.ts',
    { root, workDir, url: s.url, statement, connections: READ_CONNECTIONS, seconds: duration } satisfies AnchorChildSpec)).requestsPerSec;
  const reads: Record<string, { plan: PathPlan; anchor: () => Promise<number> }> = {
    'get-one': {
      plan: { kind: 'random-line', prefix: '/v2/user/', file: poolFile, headers: big },
      anchor: () => anchor({ teamId: s.teamId, idsFile: poolFile }),
    },
    'list-first': {
      plan: { kind: 'fixed', requests: [{ path: '/v2/user/?limit=100', headers: big }] },
      anchor: () => anchor({ teamId: s.teamId, limit: 100, offset: 0 }),
    },
  };
  const besideCreates = async <T>(disabled: boolean, measure: () => Promise<T>): Promise<T> => {
    await s.sql`UPDATE webhook_endpoints SET disabled = ${disabled} WHERE endpoint_id = ${s.webhookId}`;
    const [measured] = await Promise.all([measure(), commitToReceiver(service, s)]);
    await s.sql`UPDATE webhook_endpoints SET disabled = false WHERE endpoint_id = ${s.webhookId}`;
    await settle(s);
    return measured;
  };
  const out: Record<string, ReadsBeside> = {};
  for (const [id, read] of Object.entries(reads)) {
    const served = async () => (await load(service, read.plan, READ_CONNECTIONS)).requestsPerSec;
    out[id] = {
      alone: await served(),
      service: { noEvents: await besideCreates(true, served), withEvents: await besideCreates(false, served) },
      anchor: { noEvents: await besideCreates(true, read.anchor), withEvents: await besideCreates(false, read.anchor) },
    };
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function oneRun(run: number): Promise<Record<string, number>> {
  const s = await setUp();
  let service = await start(s, `run${run}-a`);
  const figures: Record<string, number> = {};
  try {
    const poolFile = only.has('writes') || only.has('reads') ? await pool(service, s, POOL) : '';
    if (only.has('writes')) {
      const writes = await writesWithEndpoint(service, s, poolFile);
      for (const w of ['patch', 'delete-undo', 'create'] as const) {
        const { service: served, database } = writes[w];
        figures[`${w}/s`] = served.requestsPerSec;
        figures[`${w} p99 ms`] = served.p99Ms;
        figures[`${w}/s, its statements without HTTP`] = database.requestsPerSec;
        figures[`${w} p99 ms, its statements without HTTP`] = database.p99Ms;
        figures[`${w} service / its statements`] = served.requestsPerSec / database.requestsPerSec;
      }
    }
    if (only.has('delivery')) {
      const rate = await deliveryRate(service, s);
      figures['deliveries/s (creates at 32 connections)'] = rate.deliveries;
      figures['creates/s then'] = rate.creates;
      figures['s to deliver what the load left'] = await settle(s);
    }
    if (only.has('latency')) {
      await settle(s);
      const latency = await commitToReceiver(service, s);
      figures['commit→receiver p50 ms (from the answer)'] = quantile(latency.fromAnswer, 0.5);
      figures['commit→receiver p99 ms (from the answer)'] = quantile(latency.fromAnswer, 0.99);
      figures['commit→receiver p50 ms (from the request)'] = quantile(latency.fromRequest, 0.5);
      figures['commit→receiver p99 ms (from the request)'] = quantile(latency.fromRequest, 0.99);
      figures['events delivered of those sent at 500/s'] = latency.fromRequest.length / latency.sent;
    }
    if (only.has('reads')) {
      const reads = await readsWhileEventsFlow(service, s, poolFile);
      for (const id of ['get-one', 'list-first']) {
        const r = reads[id]!;
        figures[`${id}/s alone`] = r.alone;
        figures[`${id}/s beside 500 creates/s, no events`] = r.service.noEvents;
        figures[`${id}/s beside 500 creates/s, events delivered`] = r.service.withEvents;
        figures[`${id} anchor/s beside 500 creates/s, no events`] = r.anchor.noEvents;
        figures[`${id} anchor/s beside 500 creates/s, events delivered`] = r.anchor.withEvents;
        figures[`${id} ratio to anchor, no events`] = r.service.noEvents / r.anchor.noEvents;
        figures[`${id} ratio to anchor, events delivered`] = r.service.withEvents / r.anchor.withEvents;
        figures[`${id} ratio with events / without`] = (r.service.withEvents / r.anchor.withEvents) / (r.service.noEvents / r.anchor.noEvents);
      }
    }
    if (only.has('drain')) {
      await stopService(service);
      await writeBacklog(s, Number(args.backlog));
      service = await start(s, `run${run}-b`);
      figures['backlog drain events/s'] = await backlogDrain(service, s, Number(args.backlog));
    }
    return figures;
  } finally {
    await stopService(service);
    await s.inbox.close();
    await s.sql.end();
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(workDir, { recursive: true });
  if (!args['no-build']) await runToEnd('build', 'npm', ['run', '-s', 'build']);
  const runs: Record<string, number>[] = [];
  for (let run = 1; run <= Number(args.runs); run++) {
    say(`run ${run} of ${args.runs}`);
    runs.push(await oneRun(run));
  }
  const medians = Object.fromEntries(Object.keys(runs[0]!).map((k) => [k, median(runs.map((r) => r[k]!))]));
  const m = (k: string) => medians[k]!;
  const judged: Record<string, boolean> = {};
  if (only.has('writes')) judged.writes = ['patch', 'delete-undo', 'create'].every((w) => m(`${w}/s`) >= TARGETS.writesPerSec && m(`${w} p99 ms`) <= TARGETS.writeP99Ms);
  if (only.has('delivery')) judged.delivery = m('deliveries/s (creates at 32 connections)') >= TARGETS.deliveriesPerSec;
  if (only.has('latency')) judged.latency = m('commit→receiver p50 ms (from the request)') <= TARGETS.latencyP50Ms && m('commit→receiver p99 ms (from the request)') <= TARGETS.latencyP99Ms;
  if (only.has('drain')) judged.drain = m('backlog drain events/s') >= TARGETS.drainPerSec;
  if (only.has('reads')) judged.reads = ['get-one', 'list-first'].every((r) => Math.abs(m(`${r} ratio with events / without`) - 1) <= TARGETS.readsWithin);
  for (const [k, v] of Object.entries(medians)) process.stdout.write(`${k.padEnd(48)} ${v.toFixed(2)}\n`);
  for (const [k, ok] of Object.entries(judged)) process.stdout.write(`${k.padEnd(48)} ${ok ? 'met' : 'MISSED'}\n`);
  const file = path.join(root, 'bench', 'results', 'webhooks-latest.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify({ targets: TARGETS, runs, medians, judged }, null, 2) + '\n');
  say(`wrote ${file}`);
}

try {
  await main();
} finally {
  await stopAll();
}

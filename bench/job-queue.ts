/**
 * Issue 29, item 7: a PostgreSQL job queue (graphile-worker) against our own
 * outbox (src/events/, migrations/011), measured in the same run, the two
 * alternating (`npx tsx bench/job-queue.ts`; `--help`). On a fresh database
 * `hds_bench_jobqueue` of the server of `--database-url` (only that name is
 * ever dropped), with one team, one endpoint on a receiver in this process
 * that answers 204 at once, and graphile-worker's schema beside ours:
 *
 * 1. `enqueue`: for `--duration` seconds (after a second of warm-up) at 8
 *    connections of postgres.js (our driver), one statement per change: a
 *    users-like row updated, its event inserted into `events`, and its
 *    fan-out, as src/writes/team-state.ts's `teamEvents` writes it: (a) ours,
 *    a `webhook_messages` row per enabled endpoint; (b) graphile-worker, a
 *    `graphile_worker.add_job('deliver', …)` per enabled endpoint in the
 *    same common-table expression. Commits/s and p99 ms. After each, every
 *    committed statement is checked to have its message / its job.
 * 2. `drain`: a backlog of `--backlog` events and their deliveries written in
 *    SQL (ours: pending messages due now; graphile-worker: add_jobs), then
 *    the deliverer started in this process, timed until the receiver has seen
 *    every webhook-id: (a) our Dispatcher (src/events/dispatcher.ts) on a
 *    pool of src/db/client.ts; (b) graphile-worker's run() at concurrency 32,
 *    once with its defaults and once with its batching (localQueue and
 *    batched completions), whose task posts with our Sender and signatures.
 *    Events/s.
 *
 * Before the runs, the transactional guarantee with our driver is checked,
 * for both: add_job in a postgres.js transaction is seen in it and gone
 * after its rollback; a statement that fails after its add_job (or its
 * messages' insert) leaves no job (no message) and no event; the same
 * statement that succeeds leaves one; and an add_job in a common-table
 * expression that the statement does not read is never called.
 *
 * `--runs 3` (the default) repeats both parts, the systems' order turning
 * each run; the medians are printed and, with every run, written to
 * bench/results/job-queue-latest.json (overwritten). Run it on a quiet
 * machine.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Logger, run, runMigrations, type RunnerOptions, type Task } from 'graphile-worker';
import postgres from 'postgres';
import { connect, type Sql } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { Dispatcher } from '../src/events/dispatcher.js';
import { MAX_IN_FLIGHT } from '../src/events/lane.js';
import { Sender } from '../src/events/send.js';
import { signatures } from '../src/events/signature.js';
import { messageId } from '../src/management/message-store.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { createTeam } from '../src/teams/team-store.js';
import { freshDatabase } from './database.js';
import { Inbox } from './inbox.js';
import { quantile, timedLoop } from './timed-loop.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DATABASE = 'hds_bench_jobqueue';
const CONNECTIONS = 8;
const USERS = 2000;
const WARMUP_MS = 1000;
const TIMEOUT_MS = 15_000;
const CHUNK = 10_000;
/** graphile-worker: the concurrency asked for; the pool its docs advise (`concurrentJobs + 2`). */
const GW_CONCURRENCY = 32;
const GW_POOL = GW_CONCURRENCY + 2;
/** graphile-worker's batching: a local queue of jobs fetched at once, and completions written together. */
const GW_BATCHED = { localQueue: { size: 64 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };
const GW_VARIANTS = {
  'graphile-worker (defaults)': {},
  'graphile-worker (batched)': GW_BATCHED,
} as const;
type GwVariant = keyof typeof GW_VARIANTS;

const { values: args } = parseArgs({
  options: {
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    runs: { type: 'string', default: '3' },
    backlog: { type: 'string', default: '100000' },
    duration: { type: 'string', default: '10' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(`npx tsx bench/job-queue.ts [options]

Our webhook outbox against graphile-worker: enqueue in the change's statement
(8 connections), and the drain of a backlog to a receiver in this process.
Database ${DATABASE} of the server is dropped and made again.

  --database-url URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres)
  --runs N            runs, the systems' order turning each run; medians reported (default 3)
  --backlog N         messages in the drain's backlog (default 100000)
  --duration S        seconds of each enqueue measurement (default 10)
  --help              this text
`);
  process.exit(0);
}
const runs = Number(args.runs);
const backlogSize = Number(args.backlog);
const duration = Number(args.duration);
if (!(runs >= 1 && backlogSize >= 1 && duration > 0)) throw new Error('--runs, --backlog and --duration must be positive numbers');

const say = (msg: string) => process.stderr.write(`bench/job-queue: ${msg}\n`);
const now = () => performance.timeOrigin + performance.now();

interface Setup { sql: Sql; url: string; teamId: string; endpointId: string; userIds: string[]; inbox: Inbox }

async function setUp(): Promise<Setup> {
  const url = new URL(await freshDatabase(args['database-url'], DATABASE));
  const sql = connect(url.toString(), { max: CONNECTIONS, applicationName: 'bench-job-queue' });
  await migrate(sql);
  await runMigrations({ connectionString: url.toString(), logger: quietLogger() });
  const teamId = await createTeam(sql, 'bench job queue');
  const inbox = new Inbox();
  const saved = await registerWebhook(sql, teamId, { url: await inbox.listen() }, { allowPrivate: true });
  if (typeof saved !== 'object' || !('webhook' in saved)) throw new Error('could not register the endpoint');
  // The users-like rows the changes update: a key, a team, a name and a document.
  await sql`CREATE TABLE bench_users (user_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), team_id uuid NOT NULL,
    client_user_id text NOT NULL, doc text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`;
  const users = await sql<{ user_id: string }[]>`
    INSERT INTO bench_users (team_id, client_user_id, doc)
    SELECT ${teamId}, 'user-' || g, '{"n":0}' FROM generate_series(1, ${USERS}) g RETURNING user_id`;
  return { sql, url: url.toString(), teamId, endpointId: saved.webhook.id, userIds: users.map((u) => u.user_id), inbox };
}

/** graphile-worker's log: errors only, to stderr. */
function quietLogger(): Logger {
  return new Logger(() => (level, message) => {
    if (level === 'error') say(`graphile-worker: ${message}`);
  });
}

type System = 'ours' | 'graphile-worker';

/**
 * One change: the user's row updated, its event recorded and fanned out to
 * the team's enabled endpoints that take its type, in one statement (the
 * CTEs of src/writes/team-state.ts's teamEvents; graphile-worker: add_job
 * in place of the messages' insert). `fail`: the statement fails at its end,
 * after the fan-out ran. `unread`: the add_job CTE is not read by the
 * statement (a trap: PostgreSQL never runs a SELECT CTE nobody reads).
 */
function change(sql: Sql, s: Setup, system: System, userId: string, doc: string, how: { fail?: boolean; unread?: boolean } = {}) {
  const head = sql`
    WITH changed AS (
      UPDATE bench_users SET doc = ${doc}, updated_at = now() WHERE user_id = ${userId}
      RETURNING user_id, client_user_id, doc
    ), changed_events AS (
      SELECT 'user.updated' AS event_type, user_id, client_user_id, doc AS data FROM changed
    ), team_events AS (
      INSERT INTO events (team_id, user_id, event_type, body)
      SELECT ${s.teamId}, e.user_id, e.event_type,
        '{"event_type":"' || e.event_type || '","data":' || e.data || ',"user_id":"' || e.user_id
          || '","client_user_id":' || to_json(e.client_user_id::text)::text || ',"team_id":"' || ${s.teamId}::uuid || '"}'
      FROM changed_events e
      RETURNING event_id, event_type, created_at, body
    )`;
  const endpoints = sql`webhook_endpoints w
    ON w.team_id = ${s.teamId} AND NOT w.disabled AND (w.filter_types IS NULL OR e.event_type = ANY (w.filter_types))`;
  const end = how.fail ? sql`/ 0` : sql``;
  if (system === 'ours') {
    return sql`${head}, team_messages AS (
      INSERT INTO webhook_messages (event_id, endpoint_id, created_at)
      SELECT e.event_id, w.endpoint_id, e.created_at FROM team_events e JOIN ${endpoints}
      RETURNING 1
    )
    SELECT (SELECT count(*)::int FROM team_messages) ${end} AS fanned FROM changed`;
  }
  return sql`${head}, team_jobs AS (
    SELECT graphile_worker.add_job('deliver', json_build_object('event_id', e.event_id, 'endpoint_id', w.endpoint_id, 'body', e.body)) AS job
    FROM team_events e JOIN ${endpoints}
  )
  SELECT ${how.unread ? sql`0` : sql`(SELECT count(*)::int FROM team_jobs)`} ${end} AS fanned FROM changed`;
}

interface Guarantee {
  /** A postgres.js transaction: add_job seen inside it (1), gone after its rollback (0). */
  'gw tx: jobs inside before rollback': number;
  'gw tx: jobs after rollback': number;
  /** The change's statement failing after its add_job: jobs and events left (0, 0), and the error. */
  'gw failed statement: jobs': number;
  'gw failed statement: events': number;
  'gw failed statement: error': string;
  /** The same statement succeeding: (1, 1). */
  'gw statement: jobs': number;
  'gw statement: events': number;
  /** add_job in a CTE the statement does not read: the event commits, no job (0, 1). */
  'gw unread CTE: jobs': number;
  'gw unread CTE: events': number;
  'ours failed statement: messages': number;
  'ours failed statement: events': number;
  'ours failed statement: error': string;
  'ours statement: messages': number;
  'ours statement: events': number;
  holds: boolean;
}

async function checkGuarantee(s: Setup): Promise<Guarantee> {
  const { sql } = s;
  const user = s.userIds[0]!;
  const jobs = async (tag: string, q: postgres.Sql | postgres.TransactionSql = sql) =>
    (await q<{ n: number }[]>`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload::text LIKE ${`%${tag}%`}`)[0]!.n;
  const events = async (tag: string) => (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE body LIKE ${`%${tag}%`}`)[0]!.n;
  const messages = async (tag: string) => (await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM webhook_messages m JOIN events e USING (event_id) WHERE e.body LIKE ${`%${tag}%`}`)[0]!.n;
  const failing = async (run: () => Promise<unknown>) => {
    try {
      await run();
      return 'no error';
    } catch (err) {
      return (err as Error).message;
    }
  };

  let inside = -1;
  const rolledBack = new Error('roll back');
  await sql.begin(async (tx) => {
    await tx`SELECT graphile_worker.add_job('deliver', json_build_object('check', 'check-tx'))`;
    inside = await jobs('check-tx', tx);
    throw rolledBack;
  }).catch((err) => {
    if (err !== rolledBack) throw err;
  });
  const g: Guarantee = {
    'gw tx: jobs inside before rollback': inside,
    'gw tx: jobs after rollback': await jobs('check-tx'),
    'gw failed statement: error': await failing(() => change(sql, s, 'graphile-worker', user, '{"check":"check-gw-fail"}', { fail: true })),
    'gw failed statement: jobs': await jobs('check-gw-fail'),
    'gw failed statement: events': await events('check-gw-fail'),
    'gw statement: jobs': (await change(sql, s, 'graphile-worker', user, '{"check":"check-gw-ok"}'), await jobs('check-gw-ok')),
    'gw statement: events': await events('check-gw-ok'),
    'gw unread CTE: jobs': (await change(sql, s, 'graphile-worker', user, '{"check":"check-gw-unread"}', { unread: true }), await jobs('check-gw-unread')),
    'gw unread CTE: events': await events('check-gw-unread'),
    'ours failed statement: error': await failing(() => change(sql, s, 'ours', user, '{"check":"check-ours-fail"}', { fail: true })),
    'ours failed statement: messages': await messages('check-ours-fail'),
    'ours failed statement: events': await events('check-ours-fail'),
    'ours statement: messages': (await change(sql, s, 'ours', user, '{"check":"check-ours-ok"}'), await messages('check-ours-ok')),
    'ours statement: events': await events('check-ours-ok'),
    holds: false,
  };
  g.holds = g['gw tx: jobs inside before rollback'] === 1 && g['gw tx: jobs after rollback'] === 0
    && g['gw failed statement: jobs'] === 0 && g['gw failed statement: events'] === 0 && g['gw failed statement: error'] !== 'no error'
    && g['gw statement: jobs'] === 1 && g['gw statement: events'] === 1
    && g['ours failed statement: messages'] === 0 && g['ours failed statement: events'] === 0 && g['ours failed statement: error'] !== 'no error'
    && g['ours statement: messages'] === 1 && g['ours statement: events'] === 1;
  return g;
}

/** Empties the events, messages and jobs; vacuums; checkpoints: each measurement starts from the same state. */
async function clean(sql: Sql): Promise<void> {
  await sql`TRUNCATE events, webhook_messages`;
  await sql`TRUNCATE graphile_worker._private_jobs`;
  await sql`VACUUM ANALYZE bench_users, events, webhook_messages, webhook_endpoints, graphile_worker._private_jobs`;
  await sql`CHECKPOINT`;
}

interface Enqueued { commitsPerSec: number; p99Ms: number; p50Ms: number; consistent: boolean }

/** Changes at CONNECTIONS connections for the duration (after the warm-up); every committed one must have its fan-out. */
async function enqueue(s: Setup, system: System): Promise<Enqueued> {
  await clean(s.sql);
  let committed = 0;
  let n = 0;
  const latencies = await timedLoop(CONNECTIONS, WARMUP_MS, duration, async () => {
    const i = n++;
    await change(s.sql, s, system, s.userIds[i % USERS]!, `{"fallback_time_zone":"Europe/Berlin","n":${i}}`);
    committed++;
  });
  const [counts] = await s.sql<{ events: number; fanned: number }[]>`
    SELECT (SELECT count(*)::int FROM events) AS events,
      ${system === 'ours' ? s.sql`(SELECT count(*)::int FROM webhook_messages)` : s.sql`(SELECT count(*)::int FROM graphile_worker._private_jobs)`} AS fanned`;
  const consistent = counts!.events === committed && counts!.fanned === committed;
  if (!consistent) say(`${system}: ${committed} committed, ${counts!.events} events, ${counts!.fanned} messages/jobs`);
  return { commitsPerSec: latencies.length / duration, p99Ms: quantile(latencies, 0.99), p50Ms: quantile(latencies, 0.5), consistent };
}

/** The backlog's events, as bench/webhooks.ts's writeBacklog writes them, in chunks; and each one's delivery: a pending message due now, or a job. */
async function writeBacklog(s: Setup, system: System, count: number): Promise<void> {
  await clean(s.sql);
  for (let from = 1; from <= count; from += CHUNK) {
    const to = Math.min(count, from + CHUNK - 1);
    const e = s.sql`
      INSERT INTO events (team_id, user_id, event_type, body)
      SELECT ${s.teamId}, gen_random_uuid(), 'user.updated',
        '{"event_type":"user.updated","data":{"n":' || g || '},"user_id":"00000000-0000-0000-0000-000000000000","client_user_id":"backlog","team_id":"' || ${s.teamId} || '"}'
      FROM generate_series(${from}::int, ${to}::int) g
      RETURNING event_id, created_at, body`;
    if (system === 'ours') {
      await s.sql`
        WITH e AS (${e})
        INSERT INTO webhook_messages (event_id, endpoint_id, created_at, status, next_attempt_at)
        SELECT event_id, ${s.endpointId}, created_at, 'pending', now() FROM e`;
    } else {
      await s.sql`
        WITH e AS (${e})
        SELECT count(*) FROM graphile_worker.add_jobs((
          SELECT array_agg(ROW('deliver', json_build_object('event_id', event_id, 'endpoint_id', ${s.endpointId}::uuid, 'body', body),
            NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec)
          FROM e))`;
    }
  }
  await s.sql`VACUUM ANALYZE events, webhook_messages, graphile_worker._private_jobs`;
  await s.sql`CHECKPOINT`;
}

interface Drained {
  eventsPerSec: number; delivered: number; requests: number; seconds: number;
  /** Not delivered in the database after the stop (ours: messages not `delivered`; graphile-worker: jobs still in its table). */
  left: number; leftLocked?: number; leftFailed?: number; leftError?: string;
}

/** Generous: each of our claims hash-joins the whole of webhook_messages and events (its LIMIT comes from a subquery): about 175 events/s at 100,000. */
const drainTimeoutMs = (count: number) => Math.max(120_000, count * 25);

/** Our Dispatcher, in this process on a pool of src/db/client.ts, until the receiver has seen every webhook-id. */
async function drainOurs(s: Setup, count: number): Promise<Drained> {
  await writeBacklog(s, 'ours', count);
  s.inbox.reset();
  const sql = connect(s.url, { max: 10, applicationName: 'bench-dispatcher' });
  let warnings = 0;
  const dispatcher = new Dispatcher(sql, {
    timeoutMs: TIMEOUT_MS, retryScheduleMs: [5000, 300_000], disableAfterMs: 5 * 86_400_000, allowPrivate: true,
    log: { info: () => {}, warn: (fields, msg) => { if (warnings++ < 5) say(`dispatcher: ${msg} ${JSON.stringify(fields)}`); } },
  });
  const started = now();
  await dispatcher.start();
  const last = await s.inbox.until(count, drainTimeoutMs(count), (n) => say(`ours: ${n} of ${count} arrived`));
  await dispatcher.stop(5000);
  await sql.end();
  const [left] = await s.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_messages WHERE status <> 'delivered'`;
  const seconds = (last - started) / 1000;
  return { eventsPerSec: s.inbox.arrivals.size / seconds, delivered: s.inbox.arrivals.size, requests: s.inbox.requests, seconds, left: left!.n };
}

interface DeliverPayload { event_id: string; endpoint_id: string; body: string }

/** graphile-worker's run() in this process, its task posting as a lane does (src/events/lane.ts), until the receiver has seen every webhook-id. */
async function drainGraphile(s: Setup, count: number, variant: GwVariant): Promise<Drained> {
  await writeBacklog(s, 'graphile-worker', count);
  s.inbox.reset();
  // The endpoint as a claim reads it, once: a real task would read it (disabled? rate_limit? secrets rotated?) per job.
  const [endpoint] = await s.sql<{ url: string; headers: Record<string, string>; secrets: string[] }[]>`
    SELECT e.url, e.headers, ARRAY(SELECT secret FROM webhook_secrets s WHERE s.endpoint_id = e.endpoint_id AND (s.expires_at IS NULL OR s.expires_at > now())
      ORDER BY s.expires_at DESC NULLS FIRST, s.created_at DESC) AS secrets
    FROM webhook_endpoints e WHERE e.endpoint_id = ${s.endpointId}`;
  const sender = new Sender({ timeoutMs: TIMEOUT_MS, allowPrivate: true });
  const deliver: Task = async (payload) => {
    const job = payload as DeliverPayload;
    const id = messageId(job.event_id);
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = signatures(endpoint!.secrets, id, timestamp, job.body);
    const headers = {
      ...endpoint!.headers,
      'content-type': 'application/json', 'user-agent': 'hds-webhooks/1',
      'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature,
      'svix-id': id, 'svix-timestamp': String(timestamp), 'svix-signature': signature,
    };
    const result = await sender.send(endpoint!.url, headers, job.body);
    // A failure is a throw: graphile-worker retries it on its own schedule (exp(min(attempts, 10)) s), not the upstream's.
    if (result.status === null || result.status < 200 || result.status >= 300) throw new Error(`attempt failed: ${result.status ?? result.error}`);
  };
  const options: RunnerOptions = {
    connectionString: s.url, concurrency: GW_CONCURRENCY, maxPoolSize: GW_POOL, noHandleSignals: true,
    taskList: { deliver }, logger: quietLogger(), preset: { worker: { ...GW_VARIANTS[variant] } },
  };
  const started = now();
  const runner = await run(options);
  const last = await s.inbox.until(count, drainTimeoutMs(count), (n) => say(`${variant}: ${n} of ${count} arrived`));
  await runner.stop();
  sender.close();
  // Jobs left after the runner's stop: completions not written (locked: made again after 4 hours) or failed attempts.
  const [left] = await s.sql<{ n: number; locked: number; failed: number; error: string | null }[]>`
    SELECT count(*)::int AS n, count(*) FILTER (WHERE locked_at IS NOT NULL)::int AS locked,
      count(*) FILTER (WHERE attempts > 0 AND locked_at IS NULL)::int AS failed, min(last_error) AS error
    FROM graphile_worker._private_jobs`;
  const seconds = (last - started) / 1000;
  return {
    eventsPerSec: s.inbox.arrivals.size / seconds, delivered: s.inbox.arrivals.size, requests: s.inbox.requests, seconds, left: left!.n,
    leftLocked: left!.locked, leftFailed: left!.failed, ...(left!.error ? { leftError: left!.error } : {}),
  };
}

type Figures = Record<string, number>;

async function oneRun(s: Setup, run: number): Promise<{ figures: Figures; notes: Record<string, unknown> }> {
  const figures: Figures = {};
  const notes: Record<string, unknown> = {};
  const systems: System[] = run % 2 === 1 ? ['ours', 'graphile-worker'] : ['graphile-worker', 'ours'];
  for (const system of systems) {
    say(`run ${run}: enqueue, ${system}`);
    const e = await enqueue(s, system);
    figures[`enqueue ${system} commits/s`] = e.commitsPerSec;
    figures[`enqueue ${system} p50 ms`] = e.p50Ms;
    figures[`enqueue ${system} p99 ms`] = e.p99Ms;
    notes[`enqueue ${system}: every commit has its fan-out`] = e.consistent;
  }
  const drains: ('ours' | GwVariant)[] = ['ours', 'graphile-worker (defaults)', 'graphile-worker (batched)'];
  for (let i = 0; i < drains.length; i++) {
    const which = drains[(i + run - 1) % drains.length]!;
    say(`run ${run}: drain of ${backlogSize}, ${which}`);
    const d = which === 'ours' ? await drainOurs(s, backlogSize) : await drainGraphile(s, backlogSize, which);
    figures[`drain ${which} events/s`] = d.eventsPerSec;
    notes[`drain ${which}`] = d;
    if (d.delivered < backlogSize) say(`${which}: only ${d.delivered} of ${backlogSize} arrived`);
  }
  return { figures, notes };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const s = await setUp();
  try {
    say('checking the transactional guarantee');
    const guarantee = await checkGuarantee(s);
    for (const [k, v] of Object.entries(guarantee)) say(`  ${k}: ${v}`);
    const all: { figures: Figures; notes: Record<string, unknown> }[] = [];
    for (let r = 1; r <= runs; r++) all.push(await oneRun(s, r));
    const medians = Object.fromEntries(Object.keys(all[0]!.figures).map((k) => [k, median(all.map((r) => r.figures[k]!))]));
    process.stdout.write(`\nmedians of ${runs} run(s); enqueue ${duration} s at ${CONNECTIONS} connections; drain of ${backlogSize}\n\n`);
    process.stdout.write(`${'figure'.padEnd(52)} ${'median'.padStart(10)}   runs\n`);
    for (const [k, v] of Object.entries(medians)) {
      process.stdout.write(`${k.padEnd(52)} ${v.toFixed(1).padStart(10)}   ${all.map((r) => r.figures[k]!.toFixed(1)).join(', ')}\n`);
    }
    process.stdout.write(`transactional guarantee holds for both: ${guarantee.holds}\n`);
    const { version } = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', 'graphile-worker', 'package.json'), 'utf8')) as { version: string };
    const file = path.join(root, 'bench', 'results', 'job-queue-latest.json');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify({
      at: new Date().toISOString(),
      options: { runs, backlog: backlogSize, duration, connections: CONNECTIONS, warmupMs: WARMUP_MS },
      settings: {
        'graphile-worker': version, concurrency: GW_CONCURRENCY, maxPoolSize: GW_POOL, variants: GW_VARIANTS,
        jobs: 'add_job / add_jobs without job_key, queue_name or priority; payload {event_id, endpoint_id, body}',
        ours: { dispatcherPool: 10, maxInFlightPerEndpoint: MAX_IN_FLIGHT },
      },
      guarantee, medians, runs: all,
    }, null, 2) + '\n');
    say(`wrote ${path.relative(root, file)}`);
  } finally {
    await s.inbox.close();
    await s.sql.end();
  }
}

await main();

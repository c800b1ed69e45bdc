import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before } from 'node:test';
import pino from 'pino';
import { buildApp, type App } from '../src/app.js';
import { loadConfig, type Config } from '../src/config.js';
import { connect, type Sql } from '../src/db/client.js';
import { FreezeGuard } from '../src/db/freeze-guard.js';
import { issueKey } from '../src/auth/issue-key.js';
import { createTeam } from '../src/teams/team-store.js';
import { ImportError, importUsers } from '../src/import/import.js';

export const ROOT = path.resolve(import.meta.dirname, '..');
export const GEN_USERS = path.join(ROOT, 'tools', 'gen-users.mjs');

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests with `npm test`');
  return url;
}

/** A pool for one test file; end it in after(). */
export function testSql(): Sql {
  return connect(databaseUrl(), { max: 5 });
}

/**
 * A pool for one test file behind the freeze guard, as the service's is (a
 * transaction whose connection is lost then fails alone instead of ending
 * the process); `end` it in after().
 */
export function guardedTestSql(): { sql: Sql; end(): Promise<void> } {
  const pool = testSql();
  const guard = new FreezeGuard(pool, databaseUrl());
  return {
    sql: guard.sql,
    async end() {
      await guard.close();
      // postgres.js 3.4.9 keeps a killed connection's last statement as in flight: end() would wait for it for ever.
      await pool.end({ timeout: 1 });
    },
  };
}

/** Rate limits out of reach. Every test app has them unless it sets its own: only rate-limit tests should meet a 429. */
export const NO_RATE_LIMITS = { RATE_LIMIT_PER_IP: '10000000', RATE_LIMIT_PER_TEAM: '10000000', AUTH_FAILURES_PER_IP: '10000000' };

/** The configuration of a test app: the suite's database, silent, limits out of reach, then `env`. */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({ DATABASE_URL: databaseUrl(), LOG_LEVEL: 'silent', ...NO_RATE_LIMITS, ...env });
}

let logFile: pino.DestinationStream | undefined;

/**
 * Under `npm test`, every test app logs (level info) to a file of this
 * process in HDS_TEST_LOG_DIR; test/run.ts then checks that no line of the
 * whole suite's traffic holds an API key. Synchronous writes: nothing is
 * lost when the test process exits.
 */
function testLogger(): pino.Logger | undefined {
  const dir = process.env.HDS_TEST_LOG_DIR;
  if (!dir) return undefined;
  logFile ??= pino.destination({ dest: path.join(dir, `${process.pid}.log`), sync: true, append: true });
  return pino({ level: 'info' }, logFile);
}

export async function testApp(sql: Sql, env: Record<string, string> = {}): Promise<App> {
  const config = testConfig(env);
  const loggerInstance = testLogger();
  return buildApp({ config, sql, ...(loggerInstance ? { loggerInstance } : { logger: false }) });
}

/** A stream that keeps what is written to it, read back as JSON lines. */
export function collectingStream(): { stream: Writable; lines: () => Record<string, any>[] } {
  let text = '';
  const stream = new Writable({ write(chunk, _enc, cb) { text += chunk; cb(); } });
  return { stream, lines: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

/** An app whose log lines (level info) are collected. */
export async function loggedApp(sql: Sql, env: Record<string, string> = {}): Promise<{ app: App; lines: () => Record<string, any>[] }> {
  const { stream, lines } = collectingStream();
  const app = await buildApp({ config: testConfig(env), sql, logger: { level: 'info', stream } });
  return { app, lines };
}

export interface TestTeam {
  teamId: string;
  key: string;
  keyId: string;
}

export async function teamWithKey(sql: Sql, name = 'test team'): Promise<TestTeam> {
  const teamId = await createTeam(sql, name);
  const { key, keyId } = await issueKey(sql, teamId, 'test key');
  return { teamId, key, keyId };
}

/**
 * User records from tools/gen-users.mjs with a random seed (so test files
 * sharing one database never collide on user ids), as parsed objects.
 */
export function generateUsers(users: number, teams = 1, seed = randomInt(1, 2 ** 31)): Record<string, any>[] {
  const out = execFileSync(process.execPath, [GEN_USERS, '--users', String(users), '--teams', String(teams), '--seed', String(seed)], { maxBuffer: 1 << 30 });
  return out.toString().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

export async function* lines(records: object[]): AsyncGenerator<string> {
  for (const r of records) yield JSON.stringify(r);
}

/** Imports `count` generated users into a new team with a key; returns the team and its records. */
export type TeamWithUsers = TestTeam & { users: Record<string, any>[] };

export async function teamWithUsers(sql: Sql, count: number): Promise<TeamWithUsers> {
  const team = await teamWithKey(sql);
  const users = generateUsers(count).map((u) => ({ ...u, team_id: team.teamId }));
  await importUsers(sql, lines(users));
  return { ...team, users };
}

/** The value of `metric{source="…"}` in the app's /metrics text (0 when absent). */
export async function metricBySource(app: App, metric: string, source: string): Promise<number> {
  const text = await app.metrics.render();
  return Number(new RegExp(`^${metric}\\{source="${source}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** A request to `app` as the team whose key is `key`, with a JSON body when one is given. */
export function callAs(app: App, key: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) {
  return app.inject({ method, url, headers: { 'x-service-api-key': key }, ...(payload ? { payload } : {}) });
}

/**
 * A fixture built before the tests of the describe() it is called in (handed
 * over through `use`) and closed after them: a pool, an app on it, and what
 * `build` adds with them.
 */
function appFixture<T extends object>(build: (sql: Sql) => Promise<T>, use: (fixture: { sql: Sql; app: App } & T) => void): void {
  let sql: Sql | undefined;
  let app: App | undefined;
  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    use({ sql, app, ...await build(sql) });
  });
  after(async () => {
    await app?.close();
    await sql?.end();
  });
}

export interface AppWithTwoTeams { sql: Sql; app: App; team: TeamWithUsers; other: TeamWithUsers }

/**
 * The usual fixture of a read test: a pool, an app, the caller's team and
 * another team, each with generated users; built before the file's tests
 * (handed over through `use`) and closed after them.
 */
export function appWithTwoTeams(teamSize: number, otherSize: number, use: (fixture: AppWithTwoTeams) => void): void {
  appFixture(async (sql) => ({ team: await teamWithUsers(sql, teamSize), other: await teamWithUsers(sql, otherSize) }), use);
}

export interface AppWithTeam { sql: Sql; app: App; team: TestTeam }

/**
 * The usual fixture of a write test: a pool, an app and a team with a key,
 * built before the file's tests (handed over through `use`) and closed after
 * them. Call it inside the describe() whose tests use it.
 */
export function appWithTeam(use: (fixture: AppWithTeam) => void, teamName?: string): void {
  appFixture(async (sql) => ({ team: await teamWithKey(sql, teamName) }), use);
}

export interface TwoTeams { sql: Sql; app: App; team: TestTeam; other: TestTeam }

/**
 * A pool, an app, the caller's team and another team, both with a key and
 * no users (named `name` and `name other`); built before the tests of the
 * describe() it is called in (handed over through `use`) and closed after
 * them. For the tests that check another team's requests and writes never
 * show in the caller's answers.
 */
export function twoTeams(name: string, use: (fixture: TwoTeams) => void): void {
  appFixture(async (sql) => ({ team: await teamWithKey(sql, name), other: await teamWithKey(sql, `${name} other`) }), use);
}

/** The API's list order. */
export function byListOrder(a: { created_on: string; user_id: string }, b: { created_on: string; user_id: string }): number {
  const ta = Date.parse(a.created_on), tb = Date.parse(b.created_on);
  if (ta !== tb) return ta - tb;
  return a.created_on !== b.created_on ? (a.created_on < b.created_on ? -1 : 1) : a.user_id < b.user_id ? -1 : a.user_id > b.user_id ? 1 : 0;
}

const DATE_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00:00$/;

/**
 * The same value with every date-time written with six fractional digits.
 * PostgreSQL writes a stored time with its significant fractional digits
 * ("…:09.22+00:00"), the generator always with three ("…:09.220+00:00"):
 * same instant, same JSON value for a client parsing date-times.
 */
export function canonicalTimes<T>(value: T): T {
  if (typeof value === 'string') {
    const m = DATE_TIME.exec(value);
    return (m ? `${m[1]}.${(m[2] ?? '').padEnd(6, '0')}+00:00` : value) as T;
  }
  if (Array.isArray(value)) return value.map(canonicalTimes) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, canonicalTimes(v)])) as T;
  }
  return value;
}

type Link = { created_on: string; source: { slug: string } };

/** A generated record's sources in the contract's order: created_on, then slug. */
export function withSortedSources(user: Record<string, any>): Record<string, any> {
  const links = [...(user.connected_sources as Link[])].sort((a, b) =>
    Date.parse(a.created_on) - Date.parse(b.created_on) || (a.source.slug < b.source.slug ? -1 : a.source.slug > b.source.slug ? 1 : 0));
  return { ...user, connected_sources: links };
}

/** A generated record as the API returns it: sources in order, `provider` beside each `source`. */
export function asApiUser(user: Record<string, any>): Record<string, any> {
  const sorted = withSortedSources(user);
  return { ...sorted, connected_sources: sorted.connected_sources.map((cs: Link) => ({ ...cs, provider: cs.source })) };
}

/**
 * Response headers that must agree between two answers that should be
 * indistinguishable: without the date and the request id, and with the
 * counts of a RateLimit header blanked (each request moves them; the
 * policies stay compared).
 */
export function comparableHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const { date: _date, 'x-request-id': _id, ...rest } = headers;
  if (typeof rest.ratelimit === 'string') rest.ratelimit = rest.ratelimit.replace(/;r=\d+;t=\d+/g, ';r=_;t=_');
  return rest;
}

const sleepMs = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` every `everyMs` until it gives a truthy value, and returns
 * that value (a 0 is not one: return `true` or an object). Waits on a
 * condition instead of a fixed sleep; the timeout only turns a hang into a
 * failure naming `what`, so make it generous: a slow machine must never
 * reach it.
 */
export async function until<T>(what: string, timeoutMs: number, check: () => T | undefined | null | false | Promise<T | undefined | null | false>, everyMs = 20): Promise<T> {
  const start = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleepMs(everyMs);
  }
}

/** What a system service's probe found: undefined when the service is there, otherwise what is wrong. */
export type ServiceProbe = () => string | undefined | Promise<string | undefined>;

export interface ServiceGate {
  /** Options for describe() or it(): skipped, saying what is missing and how to get it, when the service is missing (outside CI). */
  readonly options: { skip?: string };
  /** Throws what is missing and how to get it when the service is missing under CI=true: call it first, in before() or the test. */
  readonly ensure: () => void;
}

/**
 * For tests that need a system service no npm package can bring offline (a
 * Redis server, a Chromium). When `probe` finds it missing, prints what is
 * missing and how to get it (`howToGet`), and the tests are skipped with
 * that message; under CI=true (CI has these services) they run instead and
 * fail with it. Use with top-level await:
 *   const redis = await requireRedis();
 *   describe('…', redis.options, () => { before(redis.ensure); … });
 */
export async function requireService(name: string, probe: ServiceProbe, howToGet: string): Promise<ServiceGate> {
  const problem = await probe();
  if (problem === undefined) return { options: {}, ensure: () => {} };
  const what = `${name} is missing (${problem}): ${howToGet}`;
  if (process.env.CI === 'true') {
    process.stderr.write(`test: FAIL: ${what}; CI=true, so the tests that need it run and fail\n`);
    return { options: {}, ensure: () => { throw new Error(`CI=true: these tests must run, and ${what}`); } };
  }
  process.stderr.write(`test: skipped: ${what}\n`);
  return { options: { skip: what }, ensure: () => {} };
}

/** The Redis of the shared-limit tests: HDS_TEST_REDIS_URL, by default this machine's. */
export const TEST_REDIS_URL = process.env.HDS_TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/** TEST_REDIS_URL's host and port, for a raw connection to it. */
export function testRedisAddress(): { host: string; port: number } {
  const url = new URL(TEST_REDIS_URL);
  return { host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(url.port || 6379) };
}

/** Connects to TEST_REDIS_URL and sends PING, each within a second: undefined when PONG comes back, otherwise why not. */
async function pingTestRedis(): Promise<string | undefined> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(TEST_REDIS_URL, {
    lazyConnect: true, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null,
  });
  // The connection's own error says more than the rejected connect() ("Connection is closed.").
  let failure: Error | undefined;
  redis.on('error', (err: Error) => { failure ??= err; });
  try {
    await redis.connect();
    const answer = await redis.ping();
    return answer === 'PONG' ? undefined : `PING answered ${answer}`;
  } catch (err) {
    return `no answer to PING at ${TEST_REDIS_URL}: ${(failure ?? err as Error).message}`;
  } finally {
    redis.disconnect();
  }
}

/** A Redis server at TEST_REDIS_URL (the shared rate-limit tests). */
export function requireRedis(): Promise<ServiceGate> {
  return requireService('Redis', pingTestRedis,
    'install and start a Redis server (as root: apt-get install -y redis-server && service redis-server start), or set HDS_TEST_REDIS_URL to one that runs');
}

/** The Chromium the docs page test drives: HDS_TEST_CHROMIUM, by default Debian's. */
export const TEST_CHROMIUM = process.env.HDS_TEST_CHROMIUM || '/usr/bin/chromium';

/** An executable Chromium at TEST_CHROMIUM (the docs page test). Nothing is installed from the tests. */
export function requireChromium(): Promise<ServiceGate> {
  return requireService('Chromium', () => {
    try {
      fs.accessSync(TEST_CHROMIUM, fs.constants.X_OK);
      return undefined;
    } catch (err) {
      return `${TEST_CHROMIUM}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`;
    }
  }, "install Debian's chromium package (as root: apt-get update && apt-get install -y chromium), or set HDS_TEST_CHROMIUM to a Chromium binary");
}

/** Awaits an import that must fail with an ImportError at `line` whose reason matches `reason`. */
export async function rejectsAt(run: Promise<unknown>, line: number, reason: RegExp): Promise<void> {
  await assert.rejects(run, (err: unknown) => {
    assert.ok(err instanceof ImportError, String(err));
    assert.equal(err.line, line, err.message);
    assert.match(err.reason, reason);
    return true;
  });
}

/**
 * Records every unhandled rejection and uncaught exception of this process
 * from now on (either would end a production process). Call in before();
 * `assertNone()` in after() fails the file if any came, naming them.
 */
export function watchForCrashes(): { crashes: unknown[]; assertNone(): void } {
  const crashes: unknown[] = [];
  const onCrash = (err: unknown) => crashes.push(err);
  process.on('unhandledRejection', onCrash);
  process.on('uncaughtException', onCrash);
  return {
    crashes,
    assertNone() {
      process.off('unhandledRejection', onCrash);
      process.off('uncaughtException', onCrash);
      const described = crashes.map((err) => `${(err as { code?: unknown })?.code ?? ''} ${(err as Error)?.stack ?? String(err)}`);
      assert.deepEqual(described, [], 'no unhandled rejection or uncaught exception');
    },
  };
}

/** How a run of the admin CLI ended. */
export interface Run { code: number | null; stdout: string; stderr: string }

/** The admin CLI as an operator runs it (`node --import tsx src/cli/hds.ts ...`, DATABASE_URL from the environment). */
export function runHds(args: string[], input?: string | Buffer): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'cli', 'hds.ts'), ...args],
    { cwd: ROOT, env: { ...process.env, ...NO_RATE_LIMITS }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  child.stdin.end(input);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

type LogLines = () => Record<string, any>[];

/** How many times an app's log says its rate limits fell back to counting in memory (src/http/rate-limit-store.ts). */
export const redisFallbacks = (lines: LogLines) => lines().filter((l) => String(l.msg).includes('Redis unavailable')).length;

/** Whether an app counts in Redis now, by its log: every fallback it logged was followed by "Redis is back". */
export const countsInRedis = (lines: LogLines) =>
  redisFallbacks(lines) <= lines().filter((l) => String(l.msg).includes('Redis is back')).length;

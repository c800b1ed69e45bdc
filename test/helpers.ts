import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before } from 'node:test';
import pino from 'pino';
import { buildApp, type App } from '../src/app.js';
import { loadConfig, type Config } from '../src/config.js';
import { connect, type Sql } from '../src/db/client.js';
import { issueKey } from '../src/auth/issue-key.js';
import { createTeam } from '../src/teams/team-store.js';
import { importUsers } from '../src/users/import.js';

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

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({ DATABASE_URL: databaseUrl(), LOG_LEVEL: 'silent', ...env });
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

/** Rate limits out of reach, for tests that send many requests from one address. */
export const NO_RATE_LIMITS = { RATE_LIMIT_PER_IP: '10000000', RATE_LIMIT_PER_TEAM: '10000000' };

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

export interface AppWithTwoTeams { sql: Sql; app: App; team: TeamWithUsers; other: TeamWithUsers }

/**
 * The usual fixture of a read test: a pool, an app, the caller's team and
 * another team, each with generated users; built before the file's tests
 * (handed over through `use`) and closed after them.
 */
export function appWithTwoTeams(teamSize: number, otherSize: number, use: (fixture: AppWithTwoTeams) => void): void {
  let fixture: AppWithTwoTeams | undefined;
  before(async () => {
    const sql = testSql();
    const app = await testApp(sql);
    fixture = { sql, app, team: await teamWithUsers(sql, teamSize), other: await teamWithUsers(sql, otherSize) };
    use(fixture);
  });
  after(async () => {
    await fixture?.app.close();
    await fixture?.sql.end();
  });
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

/**
 * The PostgreSQL anchor: the page statement the service runs for a list
 * request (findUserPage in src/users/queries.ts), sent straight to the
 * database with the same parameters (team id, offset, limit) and at the same
 * concurrency as the list scenario it anchors, in the same rounds. A list
 * scenario then reports its throughput as a ratio to the database as well
 * as to the floor: how much of what PostgreSQL can read the service passes on.
 * get-one's anchor is PostgreSQL's own lookup of one user (LookupAnchor).
 *
 * The statement is not copied here: it is captured from the built service
 * (dist/users/queries.js) through the driver's debug hook, so the anchor
 * follows every change to the query. It is the statement as the service
 * sends it without a copy of the team's holes (src/users/hole-copies.ts):
 * after deletions its start is list_page_start's. It runs with pgbench (-M prepared: one
 * parse per connection, as the driver's prepared statements do) when pgbench
 * is on the PATH, else in a loop on the postgres driver with as many
 * connections.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { Histogram, percentile } from './latency.js';
import type { LoadResult } from './load-plan.js';
import { runToEnd } from './processes.js';
import { readIds } from './dataset.js';

/** One list request as the database sees it. */
export interface PageAnchor {
  teamId: string;
  limit: number;
  /** A fixed offset, or a random one in [0, max] for each statement. */
  offset: number | { max: number };
}

/**
 * One get-one request as the database sees it: a user's stored document by
 * team and id, one statement per user, for a random id of the file each
 * time, as the load draws them. The service batches the lookups that arrive
 * together (src/users/batched-lookups.ts): that is its own doing, so the
 * anchor does not.
 */
export interface LookupAnchor {
  teamId: string;
  /** One id per line. */
  idsFile: string;
}

/** What each parameter of the page statement takes (the offset may be sent several times; 'none' is a null, the absent copy's start). */
type Param = 'team' | 'offset' | 'limit' | 'none';

/** The statement's text and, for each of its $n, which of the page's values it takes. */
interface PageStatement {
  text: string;
  params: Param[];
}

/** What runs the anchor: pgbench, or a loop on the postgres driver. */
export type AnchorTool = 'pgbench' | 'driver';

export interface Anchor {
  tool: AnchorTool;
  /** The page statement, or the lookup, on `connections` connections for `seconds`: one transaction counts as one answer. */
  run(statement: PageAnchor | LookupAnchor, connections: number, seconds: number): Promise<LoadResult>;
  /** Each team walked in pages of `limit` (offset 0, limit, 2 x limit, ... while below its users), all teams at once, one connection each; the users read. */
  walk(teams: { teamId: string; users: number }[], limit: number): Promise<number>;
  close(): Promise<void>;
}

// Sample values that cannot be mistaken for each other in the captured parameters.
const SAMPLE_OFFSET = 7;
const SAMPLE_LIMIT = 3;

/** Captures the statement findUserPage sends, by running it once for `teamId` on a driver that reports what it sends. */
async function capturePageStatement(root: string, url: string, teamId: string): Promise<PageStatement> {
  const module = (await import(pathToFileURL(path.join(root, 'dist/users/queries.js')).href)) as { findUserPage?: (sql: postgres.Sql, teamId: string, offset: number, limit: number) => Promise<unknown> };
  if (typeof module.findUserPage !== 'function') throw new Error('dist/users/queries.js no longer exports findUserPage(sql, teamId, offset, limit): the PostgreSQL anchor needs the page statement');
  const sent: { text: string; params: unknown[] }[] = [];
  const sql = postgres(url, { max: 1, fetch_types: false, onnotice: () => {}, debug: (_connection, text, params) => sent.push({ text, params }) });
  try {
    await module.findUserPage(sql, teamId, SAMPLE_OFFSET, SAMPLE_LIMIT);
  } finally {
    await sql.end({ timeout: 5 });
  }
  const page = sent.filter((s) => s.params.includes(teamId));
  if (page.length !== 1) throw new Error(`findUserPage sent ${page.length} statements with the team id; the anchor expects exactly one`);
  const byValue = new Map<string, Param>([[teamId, 'team'], [String(SAMPLE_OFFSET), 'offset'], [String(SAMPLE_LIMIT), 'limit']]);
  const params = page[0]!.params.map((value) => {
    const param = value === null ? 'none' : byValue.get(String(value));
    if (!param) throw new Error(`findUserPage's statement takes a parameter (${String(value)}) that is not the team id, the offset or the limit; update bench/anchor.ts`);
    return param;
  });
  return { text: page[0]!.text, params };
}

const valuesOf = (statement: PageStatement, teamId: string, offset: number, limit: number) =>
  statement.params.map((p) => (p === 'team' ? teamId : p === 'offset' ? offset : p === 'limit' ? limit : null));

const offsetOf = (page: PageAnchor) => (typeof page.offset === 'number' ? page.offset : Math.floor(Math.random() * (page.offset.max + 1)));

/** A LoadResult from the response times of `requests` statements in `durationS`. */
export function resultOf(times: Histogram, requests: number, durationS: number, errors: number): LoadResult {
  const latency = times.buckets();
  return {
    requestsPerSec: durationS > 0 ? requests / durationS : 0,
    requests,
    p50Ms: percentile(latency, 0.5),
    p99Ms: percentile(latency, 0.99),
    maxMs: times.maxMs,
    latency,
    statuses: {},
    socketErrors: errors,
    durationS,
  };
}

/** The statement as a pgbench script: $n become pgbench variables (bound as parameters with -M prepared). */
function pgbenchScript(statement: PageStatement, page: PageAnchor): string {
  const offset = typeof page.offset === 'number' ? `\\set offset ${page.offset}` : `\\set offset random(0, ${page.offset.max})`;
  const param = (n: string) => statement.params[Number(n) - 1];
  return `${offset}\n${statement.text.replace(/\$(\d+)/g, (_, n: string) => (param(n) === 'none' ? 'NULL' : `:${param(n)!}`))};\n`;
}

const numberAfter = (stdout: string, label: RegExp) => Number(label.exec(stdout)?.[1] ?? NaN);

/** pgbench for `seconds` (whole seconds: pgbench's -T); response times from its per-transaction log. */
async function pgbench(workDir: string, url: string, statement: PageStatement, page: PageAnchor, connections: number, seconds: number): Promise<LoadResult> {
  const dir = fs.mkdtempSync(path.join(workDir, 'pgbench-'));
  const script = path.join(dir, 'page.sql');
  fs.writeFileSync(script, pgbenchScript(statement, page));
  try {
    const { stdout } = await runToEnd('pgbench', 'pgbench', [
      '-n', '-M', 'prepared', '-c', String(connections), '-j', '1', '-T', String(Math.max(1, Math.round(seconds))),
      '-f', script, '-D', `team=${page.teamId}`, '-D', `limit=${page.limit}`, '-l', `--log-prefix=${path.join(dir, 'tx')}`, url,
    ]);
    const requests = numberAfter(stdout, /number of transactions actually processed: (\d+)/);
    const tps = numberAfter(stdout, /tps = ([\d.]+) \(without initial connection time\)/);
    if (!(requests > 0 && tps > 0)) throw new Error(`pgbench printed no result:\n${stdout}`);
    // Each log line: client, transaction, latency (µs), script, epoch s, µs.
    const times = new Histogram();
    for (const log of fs.readdirSync(dir).filter((f) => f.startsWith('tx.'))) {
      for (const line of fs.readFileSync(path.join(dir, log), 'utf8').split('\n')) {
        const us = Number(line.split(' ')[2]);
        if (line !== '' && Number.isFinite(us)) times.add(us / 1000);
      }
    }
    const failed = numberAfter(stdout, /number of failed transactions: (\d+)/);
    return resultOf(times, requests, requests / tps, Number.isFinite(failed) ? failed : 0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** `send` back to back on `connections` loops for `seconds`; a statement that fails counts as an error, not an answer. */
async function loopOn(connections: number, seconds: number, send: () => Promise<unknown>): Promise<LoadResult> {
  const times = new Histogram();
  let requests = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < end) {
      const sent = performance.now();
      try {
        await send();
        times.add(performance.now() - sent);
        requests++;
      } catch {
        errors++;
      }
    }
  }));
  return resultOf(times, requests, (performance.now() - started) / 1000, errors);
}

/** The page statement run by `connections` loops on the driver (prepared, rows as raw bytes, as the service reads them). */
const driverLoop = (sql: postgres.Sql, statement: PageStatement, page: PageAnchor, connections: number, seconds: number) =>
  loopOn(connections, seconds, () => sql.unsafe(statement.text, valuesOf(statement, page.teamId, offsetOf(page), page.limit), { prepare: true }).raw());

/** The user's document by team and id, a random id of `ids` each time, on `connections` loops on the driver (pgbench cannot draw a uuid from a list). */
const lookupLoop = (sql: postgres.Sql, teamId: string, ids: string[], connections: number, seconds: number) =>
  loopOn(connections, seconds, () => sql`SELECT doc FROM users WHERE team_id = ${teamId} AND user_id = ${ids[Math.floor(Math.random() * ids.length)]!}`.raw());

/** One team's pages, one after the other, on the driver; the users read. */
async function walkTeam(sql: postgres.Sql, statement: PageStatement, teamId: string, users: number, limit: number): Promise<number> {
  let read = 0;
  for (let offset = 0; offset < users; offset += limit) {
    const rows = await sql.unsafe(statement.text, valuesOf(statement, teamId, offset, limit), { prepare: true }).raw();
    read += rows.length;
  }
  return read;
}

/** The anchor on the database at `url`, run by `tool`, with the statement captured from the built service. */
export async function startAnchor(root: string, workDir: string, url: string, teamId: string, tool: AnchorTool): Promise<Anchor> {
  const statement = await capturePageStatement(root, url, teamId);
  // Pools sized on first use: the driver opens connections as the loops ask for them.
  const pools = new Map<number, postgres.Sql>();
  const pool = (connections: number) => {
    let sql = pools.get(connections);
    if (!sql) pools.set(connections, (sql = postgres(url, { max: connections, onnotice: () => {} })));
    return sql;
  };
  // Ids read once per file: a million lines are read in about a second.
  const idsByFile = new Map<string, string[]>();
  const idsOf = (file: string) => {
    let ids = idsByFile.get(file);
    if (!ids) idsByFile.set(file, (ids = readIds(file)));
    return ids;
  };
  return {
    tool,
    run: (a, connections, seconds) => ('idsFile' in a
      ? lookupLoop(pool(connections), a.teamId, idsOf(a.idsFile), connections, seconds)
      : tool === 'pgbench'
        ? pgbench(workDir, url, statement, a, connections, seconds)
        : driverLoop(pool(connections), statement, a, connections, seconds)),
    walk: async (teams, limit) => {
      const sql = pool(teams.length);
      const read = await Promise.all(teams.map((t) => walkTeam(sql, statement, t.teamId, t.users, limit)));
      return read.reduce((a, b) => a + b, 0);
    },
    close: async () => {
      await Promise.all([...pools.values()].map((sql) => sql.end({ timeout: 5 })));
    },
  };
}

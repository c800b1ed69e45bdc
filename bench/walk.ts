/**
 * Walks: a client reading a whole team's list in pages of 500 (offset 0,
 * 500, 1000, ... until past its total), one page after the other, as an
 * export would. `walk` is one client on the biggest team, `walk-8` eight
 * clients at once, each on another team. Measured in users per second,
 * against the same walk done with the page statement straight on PostgreSQL
 * (bench/anchor.ts), in alternating turns (service, database, database,
 * service, ...) so that a drift of the machine's speed falls on both.
 */
import type { Anchor } from './anchor.js';
import { KEY_HEADER } from './scenarios.js';

const WALK_LIMIT = 500;

export interface WalkTeam {
  teamId: string;
  users: number;
  key: string;
}

export interface WalkResult {
  users: number;
  seconds: number;
  usersPerSec: number;
  /** Pages answered with another status than 200, plus teams whose walk did not read exactly their users. */
  errors: number;
}

export interface WalkComparison {
  service: WalkResult;
  postgres: WalkResult;
  /** Service users/s over PostgreSQL users/s. */
  ratio: number;
}

const USER = Buffer.from('"user_id":"');

/** Users in a page body: each user document has one user_id key (its connected sources have none). */
function usersIn(body: Buffer): number {
  let n = 0;
  for (let at = body.indexOf(USER); at !== -1; at = body.indexOf(USER, at + USER.length)) n++;
  return n;
}

/** One team through the service; the users read, and the errors. */
async function walkService(baseUrl: string, team: WalkTeam): Promise<{ users: number; errors: number }> {
  let users = 0;
  let errors = 0;
  for (let offset = 0; offset < team.users; offset += WALK_LIMIT) {
    const res = await fetch(`${baseUrl}/v2/user/?limit=${WALK_LIMIT}&offset=${offset}`, { headers: { [KEY_HEADER]: team.key } });
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status === 200) users += usersIn(body);
    else errors++;
  }
  // A walk that skipped or repeated users is wrong, however fast.
  return { users, errors: errors + (users === team.users ? 0 : 1) };
}

async function timed(walk: () => Promise<{ users: number; errors: number }>): Promise<WalkResult> {
  const started = performance.now();
  const { users, errors } = await walk();
  const seconds = (performance.now() - started) / 1000;
  return { users, seconds, usersPerSec: users / seconds, errors };
}

function sum(results: WalkResult[]): WalkResult {
  const users = results.reduce((n, r) => n + r.users, 0);
  const seconds = results.reduce((n, r) => n + r.seconds, 0);
  return { users, seconds, usersPerSec: seconds > 0 ? users / seconds : 0, errors: results.reduce((n, r) => n + r.errors, 0) };
}

/** The teams walked at once, `turns` times through the service and as many on PostgreSQL, alternating (ABBA...). */
export async function compareWalks(baseUrl: string, anchor: Anchor, teams: WalkTeam[], turns: number): Promise<WalkComparison> {
  const onService = () => timed(async () => {
    const walks = await Promise.all(teams.map((t) => walkService(baseUrl, t)));
    return { users: walks.reduce((n, w) => n + w.users, 0), errors: walks.reduce((n, w) => n + w.errors, 0) };
  });
  const expected = teams.reduce((n, t) => n + t.users, 0);
  const onPostgres = () => timed(async () => {
    const users = await anchor.walk(teams, WALK_LIMIT);
    return { users, errors: users === expected ? 0 : 1 };
  });
  const service: WalkResult[] = [];
  const postgres: WalkResult[] = [];
  for (let turn = 0; turn < turns; turn++) {
    if (turn % 2 === 0) {
      service.push(await onService());
      postgres.push(await onPostgres());
    } else {
      postgres.push(await onPostgres());
      service.push(await onService());
    }
  }
  const s = sum(service);
  const p = sum(postgres);
  return { service: s, postgres: p, ratio: p.usersPerSec > 0 ? s.usersPerSec / p.usersPerSec : 0 };
}

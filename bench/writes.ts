/**
 * The writes' helpers that are not a load: which users the writes touch,
 * the delete-cost check, the deletes before the lists-after-deletes
 * scenarios, and undoing the deletions a cut-off delete-undo run leaves.
 */
import type postgres from 'postgres';
import { KEY_HEADER } from './scenarios.js';

/** Users the patch and delete-undo scenarios pick from: plenty for 32 connections, few enough to save and put back (bench/restore.ts). */
export const WRITE_POOL = 2000;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** A client of the service for one team: its requests, their status and time. */
export class TeamClient {
  constructor(private readonly baseUrl: string, private readonly key: string) {}

  async send(method: string, path: string): Promise<{ status: number; ms: number; body: string }> {
    const sent = performance.now();
    const res = await fetch(this.baseUrl + path, { method, headers: { [KEY_HEADER]: this.key } });
    const body = await res.text();
    return { status: res.status, ms: performance.now() - sent, body };
  }

  deleteUser(userId: string) {
    return this.send('DELETE', `/v2/user/${userId}`);
  }

  undoDelete(userId: string) {
    return this.send('POST', `/v2/user/undo_delete?user_id=${userId}`);
  }

  /** The user at `offset` in list order, and the list's total. */
  async userAt(offset: number): Promise<{ userId: string; total: number }> {
    const { status, body } = await this.send('GET', `/v2/user/?limit=1&offset=${offset}`);
    const page = JSON.parse(body) as { users?: { user_id: string }[]; total?: number };
    const userId = page.users?.[0]?.user_id;
    if (status !== 200 || !userId || typeof page.total !== 'number') throw new Error(`no user at offset ${offset}: ${status} ${body.slice(0, 200)}`);
    return { userId, total: page.total };
  }

  /** The list's total; undefined unless the answer is a 200 with one. */
  async total(): Promise<number | undefined> {
    const { status, body } = await this.send('GET', '/v2/user/?limit=1');
    const total = status === 200 ? (JSON.parse(body) as { total?: unknown }).total : undefined;
    return typeof total === 'number' ? total : undefined;
  }
}

export interface DeleteCost {
  firstMs: number;
  lastMs: number;
  /** lastMs / firstMs. */
  ratio: number;
  /** Deletes and undos answered with another status than 200. */
  errors: number;
  times: number;
}

/**
 * The time of deleting the team's first user (in list order) against its
 * last, each deleted and at once undone, alternating, one request at a time:
 * a delete updates the team's holes (src/users/README.md), which should
 * cost the same at either end.
 */
export async function measureDeleteCost(client: TeamClient, times: number): Promise<DeleteCost> {
  const { userId: first, total } = await client.userAt(0);
  const { userId: last } = await client.userAt(total - 1);
  const took: Record<'first' | 'last', number[]> = { first: [], last: [] };
  let errors = 0;
  for (let i = 0; i < times; i++) {
    for (const [end, userId] of [['first', first], ['last', last]] as const) {
      const deleted = await client.deleteUser(userId);
      const undone = await client.undoDelete(userId);
      errors += (deleted.status === 200 ? 0 : 1) + (undone.status === 200 ? 0 : 1);
      took[end].push(deleted.ms);
    }
  }
  const firstMs = median(took.first);
  const lastMs = median(took.last);
  return { firstMs, lastMs, ratio: lastMs / firstMs, errors, times };
}

/** Runs `work` on every item, `concurrency` at a time. */
async function inParallel<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  }));
}

/** Deletes the users through the API, `concurrency` requests at a time (the service's own DELETE: nothing to keep equivalent). */
export async function deleteUsers(client: TeamClient, userIds: string[], concurrency: number): Promise<{ seconds: number; errors: number; statuses: Record<string, number> }> {
  const statuses: Record<string, number> = {};
  const started = performance.now();
  await inParallel(userIds, concurrency, async (userId) => {
    const { status } = await client.deleteUser(userId);
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  return { seconds: (performance.now() - started) / 1000, errors: userIds.length - (statuses[200] ?? 0), statuses };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Undoes, through the API, every deletion scheduled in the team: after a
 * delete-undo run the load generator stops wherever it is, and the deletes
 * it sent last have no undo yet (the next run would pick such a user again
 * and get a 404). The service may still be finishing requests the load
 * generator gave up waiting for: a short pause first, then again until the
 * team has none left. The team has no scheduled deletions of its own
 * (bench/restore.ts checks it before the writes). Returns how many were undone.
 */
export async function undoLeftovers(sql: postgres.Sql, client: TeamClient, teamId: string): Promise<number> {
  let undone = 0;
  for (let attempt = 0; attempt < 10; attempt++) {
    await sleep(250);
    const left = await sql<{ user_id: string }[]>`SELECT user_id FROM deleted_users WHERE team_id = ${teamId}`;
    if (left.length === 0) return undone;
    await inParallel(left.map((r) => r.user_id), 8, async (userId) => {
      const { status, body } = await client.undoDelete(userId);
      if (status !== 200) throw new Error(`undo_delete of ${userId} after delete-undo: ${status} ${body.slice(0, 200)}`);
      undone++;
    });
  }
  throw new Error(`deletions of team ${teamId} keep appearing after the delete-undo run`);
}

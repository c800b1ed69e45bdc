import type { PendingQuery, Row } from 'postgres';
import type { Queryable, Sql } from '../db/client.js';
import { isRefusedStatement } from '../db/errors.js';
import { KeyedBatcher } from '../db/keyed-batcher.js';
import { onePerPool } from '../db/pending-batch.js';

/** One write of a team: a single statement that ends with teamChange (team-state.ts), built on what it runs on. */
export type TeamStatement<T extends Row = Row> = (q: Queryable) => PendingQuery<T[]>;

type Settled = { rows: Row[] } | { failed: unknown };

/**
 * Every write of a team locks the team's row until its commit is on disk,
 * so concurrent writes of one team wait for each other one by one. Here the
 * team's single-statement writes in this process that arrive while its
 * previous batch is being written go out together (src/db/keyed-batcher.ts):
 * one transaction, the statements pipelined in it, one commit. An idle
 * team's write goes out at once, alone. The creates have their own batches
 * (src/users/create.ts), one statement for many users. Measured in
 * docs/decisions/team-write-batches.md.
 */
const STATEMENTS_PER_BATCH = 32;
const batchers = new WeakMap<Sql, KeyedBatcher<TeamStatement, Settled>>();

/** Runs a write of the team with the team's other writes in this process; its rows, or its own failure. */
export async function teamWrite<T extends Row>(sql: Sql, teamId: string, statement: TeamStatement<T>): Promise<T[]> {
  const batcher = onePerPool(batchers, sql, () =>
    new KeyedBatcher<TeamStatement, Settled>((_teamId, statements) => runTogether(sql, statements), STATEMENTS_PER_BATCH));
  const settled = await batcher.load(teamId, statement as unknown as TeamStatement);
  if ('failed' in settled) throw settled.failed;
  return settled.rows as T[];
}

/**
 * A batch in one transaction. When a statement of it is refused (one
 * write's conflict or deadlock fails them all), nothing was written, and
 * each runs again alone to get its own answer. Any other failure (the
 * connection lost, the server shutting down) is everyone's: the commit may
 * have been done, and run again a write could be done twice.
 */
async function runTogether(sql: Sql, statements: TeamStatement[]): Promise<Settled[]> {
  if (statements.length > 1) {
    try {
      const results = (await sql.begin((tx) => together(statements.map((statement) => statement(tx))))) as Row[][];
      return results.map((rows) => ({ rows }));
    } catch (err) {
      if (!isRefusedStatement(err)) throw err;
    }
  }
  const settled: Settled[] = [];
  for (const statement of statements) {
    try {
      settled.push({ rows: await statement(sql) });
    } catch (err) {
      settled.push({ failed: err });
    }
  }
  return settled;
}

/** The pipelined statements' rows; their first failure once all are done, so that none is still running when the batch is rolled back. */
async function together(queries: PendingQuery<Row[]>[]): Promise<Row[][]> {
  const settled = await Promise.allSettled(queries);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<Row[]>).value);
}

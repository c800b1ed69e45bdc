import postgres, { type PendingQuery, type Row } from 'postgres';
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
      return await together(sql, statements);
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

/**
 * The statements in one transaction, its COMMIT sent right behind them: the
 * callback returns once they are sent, without waiting for their answers,
 * so the driver writes the COMMIT at once. Two round trips where waiting
 * would take three (BEGIN, the statements, COMMIT), each answer also
 * waiting its turn in a busy event loop: docs/decisions/team-write-batches.md.
 * PostgreSQL runs them in order; once it refuses one, the rest fail (25P02)
 * and the COMMIT is answered ROLLBACK: that error is thrown, nothing was
 * written. A failure of the driver's own is thrown as it is: the outcome is
 * not known, so runTogether runs nothing again.
 */
async function together(sql: Sql, statements: TeamStatement[]): Promise<Settled[]> {
  // Returned in an object, not awaited: an array or a promise returned would make the driver wait for the answers.
  const { answers } = await sql.begin((tx) => {
    const sent = statements.map((statement) => statement(tx));
    for (const query of sent) void query.execute();
    return { answers: Promise.allSettled(sent) };
  });
  const settled = await answers;
  const failed = settled.filter((s) => s.status === 'rejected').map((s) => s.reason as unknown);
  if (failed.length > 0) throw failed.find((err) => err instanceof postgres.PostgresError) ?? failed[0];
  return settled.map((s) => ({ rows: (s as PromiseFulfilledResult<Row[]>).value }));
}

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

/**
 * A transaction begun before its statements are known: called with them,
 * it sends them and its COMMIT. One is begun for a team's next batch as its
 * first write starts waiting: its BEGIN is answered while the batch before
 * it is in flight, and the batch goes out without that round trip
 * (docs/decisions/team-write-batches.md). It holds a connection and no lock.
 */
type BegunTransaction = (statements: TeamStatement[]) => Promise<Settled[]> | undefined;

/** A pool's team batches, and the transactions begun ahead for them. */
class TeamBatches {
  readonly batcher: KeyedBatcher<TeamStatement, Settled, BegunTransaction>;
  private begunAhead = 0;
  /**
   * At most half the pool waits begun ahead. A batch that runs its writes
   * again alone needs a free connection, and a transaction begun ahead waits
   * for its team's batch: were every connection held by one, both would wait
   * for ever.
   */
  private readonly mostBegunAhead: number;

  constructor(private readonly sql: Sql) {
    // A transaction's sql given as the pool (writes inside a transaction of the caller's) has no pool to begin others on.
    const { options } = sql as Partial<Sql>;
    this.mostBegunAhead = options ? Math.floor(options.max / 2) : 0;
    this.batcher = new KeyedBatcher((_teamId, statements, begun) => runTogether(sql, statements, begun),
      STATEMENTS_PER_BATCH, () => this.beginAhead());
  }

  private beginAhead(): BegunTransaction | undefined {
    if (this.begunAhead >= this.mostBegunAhead) return undefined;
    this.begunAhead++;
    return beginBatchTransaction(this.sql, () => this.begunAhead--);
  }
}

const teamBatches = new WeakMap<Sql, TeamBatches>();

/** Runs a write of the team with the team's other writes in this process; its rows, or its own failure. */
export async function teamWrite<T extends Row>(sql: Sql, teamId: string, statement: TeamStatement<T>): Promise<T[]> {
  const { batcher } = onePerPool(teamBatches, sql, () => new TeamBatches(sql));
  const settled = await batcher.load(teamId, statement as unknown as TeamStatement);
  if ('failed' in settled) throw settled.failed;
  return settled.rows as T[];
}

/**
 * A batch in one transaction (`begun` ahead of it, or begun now). When a
 * statement of it is refused (one write's conflict or deadlock fails them
 * all), nothing was written, and each runs again alone to get its own
 * answer. Any other failure (the connection lost, the server shutting down)
 * is everyone's: the commit may have been done, and run again a write could
 * be done twice.
 */
async function runTogether(sql: Sql, statements: TeamStatement[], begun: BegunTransaction | undefined): Promise<Settled[]> {
  if (statements.length > 1 || begun) {
    try {
      // A transaction begun ahead whose BEGIN failed took no statement: the batch is sent in a new one.
      return await (begun?.(statements) ?? beginBatchTransaction(sql)(statements)!);
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
 * Begins a transaction whose statements are sent once handed over, with
 * its COMMIT right behind them: the callback returns once they are sent,
 * without waiting for their answers, so the driver writes the COMMIT at
 * once. One round trip once begun, where waiting would take two (the
 * statements, COMMIT), each answer also waiting its turn in a busy event
 * loop. PostgreSQL runs them in order; once it refuses one, the rest fail
 * (25P02) and the COMMIT is answered ROLLBACK: that error is thrown,
 * nothing was written. A failure of the driver's own is thrown as it is:
 * the outcome is not known, so runTogether runs nothing again. Handed over
 * after the transaction failed to begin, the statements are not taken
 * (undefined), and none is sent.
 */
function beginBatchTransaction(sql: Sql, ended: () => void = () => {}): BegunTransaction {
  let handOver!: (statements: TeamStatement[]) => void;
  const handedOver = new Promise<TeamStatement[]>((resolve) => { handOver = resolve; });
  // Read only at the hand-over, which happens once: set before it, the transaction took nothing.
  let failed = false;
  // Returned in an object, not awaited: an array or a promise returned would make the driver wait for the answers.
  const done = sql.begin(async (tx) => {
    const sent = (await handedOver).map((statement) => statement(tx));
    for (const query of sent) void query.execute();
    return { answers: Promise.allSettled(sent) };
  });
  void done.then(ended, () => {
    failed = true;
    ended();
  });
  return (statements) => {
    // Always handed something, so that a callback still running (its transaction abandoned) ends.
    handOver(failed ? [] : statements);
    return failed ? undefined : answersOf(done);
  };
}

async function answersOf(done: Promise<{ answers: Promise<PromiseSettledResult<Row[]>[]> }>): Promise<Settled[]> {
  const settled = await (await done).answers;
  const failed = settled.filter((s) => s.status === 'rejected').map((s) => s.reason as unknown);
  if (failed.length > 0) throw failed.find((err) => err instanceof postgres.PostgresError) ?? failed[0];
  return settled.map((s) => ({ rows: (s as PromiseFulfilledResult<Row[]>).value }));
}

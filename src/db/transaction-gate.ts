import postgres from 'postgres';
import type { Sql } from './client.js';
import { checkDriverQueue } from './driver-queue.js';
import { isConnectionClosed } from './errors.js';

/**
 * A pool whose transactions survive losing their connection. When a
 * transaction's backend dies (a backend killed, a server restarted),
 * postgres.js 3.4.9 writes its ROLLBACK or COMMIT to the closed socket from
 * a timer: an uncaught TypeError that ends the process
 * (porsager/postgres#1208). Through this gate, from the first
 * closed-connection error a transaction meets on, its statements are
 * refused and never sent, and its callback never settles, so the driver
 * writes neither, and `begin` fails with the connection's error alone.
 * Savepoints are gated the same way, and a statement made once the
 * transaction is over is refused. The primary's pool goes through it in
 * the server, the CLI and the cluster primary alike (src/db/database.ts);
 * the replicas' pools and the delivery thread's make no transactions. The
 * freeze guard (./freeze-guard.ts) builds on its hooks.
 * test/db-connection-faults.test.ts kills transactions' backends to guard it.
 */

/** The parts of a postgres.js query (src/query.js, 3.4) the gate uses: it is dispatched to the pool by `handler`. */
export interface DriverQuery {
  handler: ((query: DriverQuery) => void) & { debug?: unknown };
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** The postgres.js version the gate's use of its internals was verified on; package.json pins it. */
export const VERIFIED_DRIVER_VERSION = '3.4.9';

/**
 * Throws, saying why, unless `pool` makes queries with the internals the
 * gate relies on, and the driver has this project's fix of its queues
 * (./driver-queue.ts). A query made and never awaited is never sent: this
 * costs nothing and runs nothing.
 */
export function checkDriverInternals(pool: Sql): void {
  checkDriverQueue();
  const query = pool`SELECT 1` as unknown as Partial<Record<keyof DriverQuery, unknown>>;
  const missing: string[] = (['handler', 'resolve', 'reject'] as const).filter((name) => typeof query[name] !== 'function');
  if (typeof (pool as { begin?: unknown }).begin !== 'function') missing.push('begin');
  if (missing.length > 0) {
    throw new Error(`the database gate needs postgres.js internals that this driver lacks (${missing.join(', ')}); `
      + `it was verified on postgres ${VERIFIED_DRIVER_VERSION}, which package.json pins: reinstall with npm ci`);
  }
}

type AnyFunction = (...args: unknown[]) => unknown;

/** A transaction under way, as its statements are gated: each is refused once any of these is set. */
export interface TransactionState {
  /** Failed at once by the gate's owner (the freeze guard, when the database is marked frozen), with this error. */
  abandonedBy?: Error;
  /** Its `begin` has settled. */
  over: boolean;
  /** The first closed-connection error it met. */
  closedBy?: unknown;
}

/** Notes a closed-connection error of the transaction's (the first one is kept). */
function noteClosed(state: TransactionState, err: unknown): void {
  if (state.closedBy === undefined && isConnectionClosed(err)) state.closedBy = err;
}

export class TransactionGate {
  /** The pool behind the gate: use it as the pool itself. */
  readonly sql: Sql;

  constructor(pool: Sql) {
    checkDriverInternals(pool);
    this.sql = this.gate(pool);
  }

  /** Why a statement (of `transaction`, or of the pool when undefined), or a new transaction, is refused before it is sent. */
  protected refusal(transaction: TransactionState | undefined): Error | undefined {
    return transaction?.abandonedBy;
  }

  /** A statement sent; `reject` fails its caller's promise. */
  protected sent(_query: DriverQuery, _reject: (err: unknown) => void): void {}

  /** A sent statement settled: `answered` when the server answered it (a result or an error of PostgreSQL's). */
  protected settled(_query: DriverQuery, _answered: boolean): void {}

  /** A transaction started; `reject` fails its caller's promise at once (it then counts as abandoned). */
  protected started(_transaction: TransactionState, _reject: (err: Error) => void): void {}

  /** A transaction's `begin` settled. */
  protected ended(_transaction: TransactionState): void {}

  /**
   * `target` (the pool, or a transaction's sql) as it is, except that every
   * query it makes goes through dispatch() and `begin` through begin().
   */
  private gate(target: Sql, transaction?: TransactionState): Sql {
    // Every query of one pool or transaction has the same handler: its wrapper is made once, not per query.
    let send: DriverQuery['handler'] | undefined;
    let wrapped: DriverQuery['handler'] | undefined;
    const watch = (result: unknown) => {
      const query = result as DriverQuery;
      if (query.handler !== send || !wrapped) {
        const original = query.handler;
        send = original;
        wrapped = Object.assign((q: DriverQuery) => this.dispatch(q, original, transaction), { debug: original.debug });
      }
      // The query calls its handler once, when first awaited: that is when it would reach the pool.
      query.handler = wrapped;
      return result;
    };
    return new Proxy(target, {
      apply: (fn, self, args: unknown[]) => {
        const result = Reflect.apply(fn, self, args);
        // A tagged template makes a query; sql(value) and sql('name') make fragments, left alone.
        return Array.isArray((args[0] as { raw?: unknown } | undefined)?.raw) ? watch(result) : result;
      },
      get: (obj, prop, receiver) => {
        const value = Reflect.get(obj, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'unsafe' || prop === 'file') return (...args: unknown[]) => watch((value as AnyFunction).apply(obj, args));
        if (prop === 'begin') return (...args: unknown[]) => this.begin(value as AnyFunction, obj, args);
        if (prop === 'savepoint' && transaction) return (...args: unknown[]) => this.savepoint(value as AnyFunction, obj, args, transaction);
        return value;
      },
    });
  }

  private dispatch(query: DriverQuery, send: (query: DriverQuery) => void, transaction: TransactionState | undefined): void {
    const refusal = this.refusal(transaction);
    if (refusal) {
      query.reject(refusal);
      return;
    }
    if (transaction && (transaction.closedBy !== undefined || transaction.over)) {
      query.reject(transaction.closedBy ?? new Error('a statement of a transaction that is over'));
      return;
    }
    const { resolve, reject } = query;
    query.resolve = (value) => {
      this.settled(query, true);
      resolve(value);
    };
    query.reject = (err) => {
      // An error from PostgreSQL is an answer; a connection error is not.
      const answered = err instanceof postgres.PostgresError;
      this.settled(query, answered);
      if (!answered && transaction) noteClosed(transaction, err);
      reject(err);
    };
    this.sent(query, reject);
    send(query);
  }

  /**
   * A transaction: refused at once when refusal() says so; its caller's
   * promise may be failed at once by the gate's owner while it runs (its
   * statements are then refused as they are made, so that it rolls back
   * instead of going on). Once its connection has closed, or once it is
   * over, its statements are refused too; and a callback that ends after
   * its connection closed is never settled (see the top of this file).
   */
  private begin(begin: AnyFunction, pool: Sql, args: unknown[]): Promise<unknown> {
    const refusal = this.refusal(undefined);
    if (refusal) return Promise.reject(refusal);
    const fn = args[args.length - 1] as (tx: Sql) => unknown;
    const mode = args.slice(0, -1);
    return new Promise((resolve, reject) => {
      const state: TransactionState = { over: false };
      this.started(state, (err) => {
        state.abandonedBy = err;
        reject(err);
      });
      const body = (tx: Sql) => {
        if (state.abandonedBy) throw state.abandonedBy;
        return this.settledUnlessClosed(fn, tx, state);
      };
      (begin.apply(pool, [...mode, body]) as Promise<unknown>)
        .then(resolve, (err: unknown) => {
          // The connection closed while no statement of it was out: the callback's next one must not be sent either.
          noteClosed(state, err);
          reject(err);
        })
        .finally(() => {
          state.over = true;
          this.ended(state);
        });
    });
  }

  /** A savepoint of a transaction: its statements gated as the transaction's. */
  private savepoint(savepoint: AnyFunction, tx: Sql, args: unknown[], transaction: TransactionState): Promise<unknown> {
    const fn = args[args.length - 1];
    if (typeof fn !== 'function') return savepoint.apply(tx, args) as Promise<unknown>;
    const body = (sp: Sql) => this.settledUnlessClosed(fn as (sp: Sql) => unknown, sp, transaction);
    return savepoint.apply(tx, [...args.slice(0, -1), body]) as Promise<unknown>;
  }

  /**
   * `fn` run on the gated `tx` (a transaction's or a savepoint's), settled
   * as it settles unless the connection closed meanwhile: then never, so
   * that the driver writes nothing more to it.
   */
  private async settledUnlessClosed(fn: (tx: Sql) => unknown, tx: Sql, transaction: TransactionState): Promise<unknown> {
    try {
      const result = fn(this.gate(tx, transaction));
      return await (Array.isArray(result) ? Promise.all(result) : result);
    } catch (err) {
      // Also an error of a statement the driver sent itself (a savepoint's), which no gate saw.
      noteClosed(transaction, err);
      throw err;
    } finally {
      // A promise of its own, not a shared one: nothing keeps this call alive once it waits on it.
      if (transaction.closedBy !== undefined) await new Promise<never>(() => {});
    }
  }
}

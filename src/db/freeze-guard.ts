import { performance } from 'node:perf_hooks';
import type { Sql } from './client.js';
import { DATABASE_FROZEN } from './errors.js';
import { stalledMs } from '../loop-clock.js';
import { closeProbe, databaseName, openProbe } from './probe.js';
import { TransactionGate, type DriverQuery, type TransactionState } from './transaction-gate.js';

/**
 * A frozen database: every PostgreSQL process stopped (SIGSTOP, a hung host,
 * a stalled disk) or a network that drops packets instead of refusing them.
 * The kernel still completes TCP handshakes and acknowledges keepalives, so
 * no connection error ever comes; a query on an open connection never
 * answers, and the server-side statement_timeout cannot fire on a server
 * that does not run. Requests would wait for the client's own timeout.
 *
 * The guard watches the primary with a probe of its own (`SELECT 1` on a
 * connection outside the pool, every `checkIntervalMs`). When the probe has
 * waited `frozenAfterMs` and no query of the pool has been answered either in
 * that time, the database is marked frozen: every query and transaction in
 * flight fails at once with DATABASE_FROZEN (503 with Retry-After), and so
 * does every new one, without reaching the pool, until a probe is answered
 * again. Worst case from the freeze to the 503: one interval plus the
 * deadline, 1.25 s by default. A slow query is not a frozen server: while any
 * query of the pool is being answered the database is alive, whatever the
 * probe's delay, and only the server's statement timeout bounds that query.
 * Time in which this process's own event loop could not run (src/loop-clock.ts)
 * is not counted as the database's silence: an answer cannot be read then.
 * Why these figures: docs/decisions/freeze-guard-threshold.md. The guard is
 * the pool's transaction gate (./transaction-gate.ts), whose hooks it uses to
 * refuse, track and abandon queries and transactions.
 *
 * Only the promises are failed: the guard never closes a connection of the
 * pool. postgres.js 3.4 cannot lose a connection in the middle of a
 * transaction (the transaction's ROLLBACK is written to a closed socket:
 * an uncaught TypeError, or a connection stuck for good; porsager/postgres
 * issues 1133, 1186 and 1208), whereas a frozen server, once it runs again,
 * answers what was sent to it. So a connection of the pool keeps waiting on
 * its abandoned query while the database is frozen, with nothing else sent to
 * it, and is free again once the query is answered; an abandoned transaction
 * rolls back then (its statements fail, so its ROLLBACK is the next thing it
 * sends). As with any timeout, a statement already sent may still take effect
 * when the server resumes: a 503 says the outcome is unknown.
 */

/**
 * How long one probe is waited for before its connection is dropped and a
 * new one opened next time (a server that restarted during the freeze never
 * answers the old one); at least the time after which the database counts as
 * frozen. Meanwhile a frozen server that resumes answers the probe waiting on
 * it at once.
 */
const PROBE_PATIENCE_MS = 5000;

export interface FreezeGuardOptions {
  /** How often the probe runs. */
  checkIntervalMs?: number;
  /** How long the probe, and every query of the pool, may go unanswered before the database is taken as frozen. */
  frozenAfterMs?: number;
  /** The probe connection's application_name. */
  applicationName?: string;
}

export interface DatabaseHealthChange {
  /** host:port/database, never the password. */
  database: string;
  healthy: boolean;
  /** Why it was marked frozen. */
  reason?: string;
  /** Queries in flight failed at once when it was marked frozen. */
  abandoned_queries?: number;
  /** Transactions in flight failed at once when it was marked frozen. */
  abandoned_transactions?: number;
  /** How long it was frozen. */
  frozen_ms?: number;
  /** Abandoned queries and transactions the server has not answered yet (they hold their connections until it does). */
  unanswered?: number;
}

export interface FreezeStats {
  frozen: boolean;
  /** Times the database was marked frozen. */
  freezes: number;
  /** Queries and transactions failed at once because the database was frozen when they started or while they ran. */
  refused: number;
  /** Abandoned queries and transactions not yet answered by the server. */
  unanswered: number;
  /** Connections the probe has opened: one, plus one each time it gave up on one. */
  probeConnections: number;
}

/** A log's two methods that the transitions use (a pino or Fastify logger has them). */
export interface TransitionLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Logs the guard's transitions, once each, not once per request: an error
 * when the database stops answering, a warning when it answers again.
 */
export function logTransitions(guard: FreezeGuard, log: TransitionLog): void {
  guard.onHealthChange = (change) => {
    if (change.healthy) log.warn(change, 'database answering again');
    else log.error(change, 'database unavailable: not answering; its queries fail at once (503) until it answers');
  };
}

class DatabaseFrozenError extends Error {
  readonly code = DATABASE_FROZEN;
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseFrozenError';
  }
}

const now = () => performance.now();

/** The pool behind a transaction gate (./transaction-gate.ts) whose hooks fail everything at once while the database is frozen. */
export class FreezeGuard extends TransactionGate {
  /** Called on every transition (once when the database is marked frozen, once when it answers again). */
  onHealthChange: (change: DatabaseHealthChange) => void = () => {};

  private readonly name: string;
  private readonly url: string;
  private readonly checkIntervalMs: number;
  private readonly frozenAfterMs: number;
  private readonly probePatienceMs: number;
  private readonly applicationName: string;
  private readonly timer: NodeJS.Timeout;
  /** Queries sent to the pool and not answered yet, each with the rejection of its caller's promise. */
  private readonly inFlight = new Map<DriverQuery, (err: unknown) => void>();
  /** Transactions under way, each with a function that abandons it. */
  private readonly transactions = new Map<TransactionState, (err: Error) => void>();
  /** Abandoned queries and transactions the server has not answered yet. */
  private readonly unanswered = new Set<object>();
  private frozenSince: number | undefined;
  private error = new DatabaseFrozenError('database not answering');
  /** When a query of the pool or the probe last got an answer from the server, and the loop's stalls until then. */
  private lastAnswerAt = now();
  private stalledAtLastAnswer = 0;
  /** Not before a first answered probe: a database that never answered is the connect timeout's business. */
  private armed = false;
  private probe: Sql | undefined;
  private probing = false;
  private closed = false;
  private freezes = 0;
  private refused = 0;
  private probeConnections = 0;

  constructor(pool: Sql, url: string, options: FreezeGuardOptions = {}) {
    super(pool);
    this.name = databaseName(url, 'database');
    this.url = url;
    this.checkIntervalMs = options.checkIntervalMs ?? 250;
    this.frozenAfterMs = options.frozenAfterMs ?? 1000;
    this.probePatienceMs = Math.max(PROBE_PATIENCE_MS, this.frozenAfterMs);
    this.applicationName = options.applicationName ?? 'hds-health';
    this.timer = setInterval(() => {
      if (!this.probing) void this.check();
    }, this.checkIntervalMs);
    this.timer.unref();
    void this.check();
  }

  get frozen(): boolean {
    return this.frozenSince !== undefined;
  }

  stats(): FreezeStats {
    return {
      frozen: this.frozen, freezes: this.freezes, refused: this.refused, unanswered: this.unanswered.size,
      probeConnections: this.probeConnections,
    };
  }

  /** Stops the probe (the pool belongs to the caller). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.dropProbe();
  }

  protected override refusal(transaction: TransactionState | undefined): Error | undefined {
    const refusal = this.frozen ? this.error : super.refusal(transaction);
    if (refusal) this.refused++;
    return refusal;
  }

  protected override sent(query: DriverQuery, reject: (err: unknown) => void): void {
    this.inFlight.set(query, reject);
  }

  protected override settled(query: DriverQuery, answered: boolean): void {
    this.inFlight.delete(query);
    this.unanswered.delete(query);
    if (answered) this.answered();
  }

  protected override started(transaction: TransactionState, abandon: (err: Error) => void): void {
    this.transactions.set(transaction, abandon);
  }

  protected override ended(transaction: TransactionState): void {
    this.transactions.delete(transaction);
    this.unanswered.delete(transaction);
  }

  private freeze(reason: string): void {
    if (this.frozen) return;
    this.frozenSince = now();
    this.freezes++;
    this.error = new DatabaseFrozenError(`database ${this.name} not answering (${reason})`);
    const queries = [...this.inFlight];
    this.inFlight.clear();
    for (const [query, reject] of queries) {
      this.unanswered.add(query);
      reject(this.error);
    }
    const transactions = [...this.transactions];
    this.transactions.clear();
    for (const [transaction, abandon] of transactions) {
      this.unanswered.add(transaction);
      abandon(this.error);
    }
    this.refused += queries.length + transactions.length;
    this.onHealthChange({
      database: this.name, healthy: false, reason,
      abandoned_queries: queries.length, abandoned_transactions: transactions.length,
    });
  }

  private thaw(): void {
    if (this.frozenSince === undefined) return;
    const frozenMs = Math.round(now() - this.frozenSince);
    this.frozenSince = undefined;
    this.onHealthChange({ database: this.name, healthy: true, frozen_ms: frozenMs, unanswered: this.unanswered.size });
  }

  private answered(): void {
    this.lastAnswerAt = now();
    this.stalledAtLastAnswer = stalledMs();
  }

  /**
   * How long the database has been silent, counted from `since` (with the
   * loop's stalls until then), or from the last answer if that is later:
   * wall time less the time this process's event loop could not run.
   */
  private silenceMs(since: number, stalledAtSince: number): number {
    const [from, stalledAtFrom] = this.lastAnswerAt > since ? [this.lastAnswerAt, this.stalledAtLastAnswer] : [since, stalledAtSince];
    return now() - from - (stalledMs() - stalledAtFrom);
  }

  /**
   * One probe: waits for its answer. While the database answers, it is
   * marked frozen once the probe has waited frozenAfterMs with no answer to
   * any query meanwhile (the loop's own stalls not counted). The probe's
   * connection is then dropped (it may be the one thing stuck: a fresh one
   * tells) and a new probe sent at once on a new connection, whose startup
   * a resumed server completes at once.
   */
  private async check(): Promise<void> {
    if (this.closed) return;
    this.probing = true;
    let froze = false;
    try {
      if (!this.probe) this.probeConnections++;
      this.probe ??= openProbe(this.url, Math.ceil(this.probePatienceMs / 1000), this.applicationName);
      const startedAt = now();
      const stalledAtStart = stalledMs();
      let outcome: 'ok' | 'failed' | undefined;
      const answer = this.probe`SELECT 1`.then(() => { outcome = 'ok'; }, () => { outcome = 'failed'; });
      for (;;) {
        const giveUpAt = startedAt + this.probePatienceMs;
        const watching = this.armed && !this.frozen;
        const silentFor = this.silenceMs(startedAt, stalledAtStart);
        await this.until(answer, watching ? Math.min(this.frozenAfterMs - silentFor, giveUpAt - now()) : giveUpAt - now());
        if (outcome || this.closed) break;
        if (watching && this.silenceMs(startedAt, stalledAtStart) >= this.frozenAfterMs) {
          this.freeze(`no answer within ${this.frozenAfterMs} ms`);
          froze = true;
          break;
        }
        if (now() >= giveUpAt) break;
      }
      if (outcome === 'ok') {
        this.answered();
        this.armed = true;
        this.thaw();
      } else {
        // Failed (a refusal is not a freeze: the pool's own queries fail at once then) or not answered: start afresh.
        await this.dropProbe();
      }
    } finally {
      this.probing = false;
    }
    // At once, not at the next interval: the new probe is what notices the server resuming.
    if (froze && !this.closed) void this.check();
  }

  /**
   * Waits for `answer` or `ms`, whichever comes first. After the timer, one
   * more turn of the event loop: answers that arrived while the loop was busy
   * elsewhere are read first, so a late timer never passes for a silent server.
   */
  private until(answer: Promise<void>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const elapsed = new Promise<void>((resolve) => {
      timer = setTimeout(() => setImmediate(resolve), Math.max(0, ms));
      timer.unref();
    });
    return Promise.race([answer, elapsed]).finally(() => clearTimeout(timer));
  }

  private async dropProbe(): Promise<void> {
    const probe = this.probe;
    this.probe = undefined;
    await closeProbe(probe);
  }
}

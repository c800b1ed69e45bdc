import type { Sql } from './client.js';
import { errorCode, isDatabaseUnavailable } from './errors.js';
import { closeProbe, databaseName, openProbe } from './probe.js';

export interface ReplicaPool {
  /** The replica's pool, used for reads. */
  sql: Sql;
  /** Its URL: the health check opens its own connection, so a busy pool never looks like a dead replica. */
  url: string;
}

export interface ReadRouterOptions {
  /** How often each replica is probed. */
  checkIntervalMs?: number;
  /** A probe slower than this marks the replica down. */
  checkTimeoutMs?: number;
}

export interface ReplicaHealthChange {
  replica: string;
  healthy: boolean;
  reason?: string;
}

export interface ReadStats {
  primaryReads: number;
  replicas: { replica: string; healthy: boolean; reads: number }[];
}

interface Replica {
  name: string;
  sql: Sql;
  url: string;
  healthy: boolean;
  reads: number;
  probe: Sql | undefined;
  probing: boolean;
  /** Reads in flight on this replica: told to give up when it is marked down. */
  waiters: Set<() => void>;
}

const ABANDONED = Symbol('replica went down');

/** Unavailable, but not merely slow: a statement timeout (57014) says nothing about the replica's health. */
const meansReplicaDown = (err: unknown) => isDatabaseUnavailable(err) && errorCode(err) !== '57014';

/** A failure that is part of a replica's normal life (unavailable, slow, a recovery conflict): re-run without a word. */
const isExpectedOnReplica = (err: unknown) => isDatabaseUnavailable(err) || errorCode(err) === '40001';

export interface ReplicaReadFailure {
  replica: string;
  code: string | undefined;
  message: string;
}

/**
 * Sends reads to the healthy read replicas in turn and everything else to the
 * primary. A read that fails on a replica, for whatever reason, is re-run on
 * the primary: a replica only ever holds a copy of what the primary has, so
 * the primary's answer is the one to give, and the client sees no failure
 * the primary would not also have. A replica leaves the rotation at once when
 * a read on it fails with a connection error, or when a background probe
 * fails or takes longer than `checkTimeoutMs`; it comes back when a probe
 * succeeds again. Reads in flight on a replica that is marked down are re-run
 * on the primary instead of waiting for a server that no longer answers.
 * Without replicas every read runs on the primary, with no timers.
 */
export class ReadRouter {
  private readonly replicas: Replica[];
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly checkTimeoutMs: number;
  private next = 0;
  private primaryReads = 0;
  /** Called on every health transition; the server points it at its log. */
  onHealthChange: (change: ReplicaHealthChange) => void = () => {};
  /** Called when a read fails on a replica for a reason other than its unavailability; the server logs it. */
  onReadFailed: (failure: ReplicaReadFailure) => void = () => {};

  constructor(readonly primary: Sql, replicas: ReplicaPool[] = [], options: ReadRouterOptions = {}) {
    // Interval + timeout stays under a second: the longest a silent replica keeps its place.
    this.checkTimeoutMs = options.checkTimeoutMs ?? 500;
    this.replicas = replicas.map((r) => ({
      name: databaseName(r.url, 'replica'), sql: r.sql, url: r.url, healthy: true, reads: 0, probe: undefined, probing: false, waiters: new Set(),
    }));
    if (this.replicas.length > 0) {
      this.timer = setInterval(() => this.checkAll(), options.checkIntervalMs ?? 250);
      this.timer.unref();
      this.checkAll();
    }
  }

  /** Runs a read on a healthy replica (round robin), or on the primary when none is healthy or the replica fails. */
  async read<T>(query: (sql: Sql) => Promise<T>): Promise<T> {
    // Without replicas, no bookkeeping promise around the query.
    if (this.replicas.length === 0) return this.onPrimary(query);
    return (await this.run(query)).value;
  }

  /**
   * A lookup whose miss on a replica is confirmed on the primary: a replica may
   * not yet have replayed a create that the client just saw succeed.
   */
  async readConfirmed<T>(query: (sql: Sql) => Promise<T | undefined>): Promise<T | undefined> {
    if (this.replicas.length === 0) return this.onPrimary(query);
    const { value, onPrimary } = await this.run(query);
    if (value !== undefined || onPrimary) return value;
    return query(this.primary);
  }

  stats(): ReadStats {
    return {
      primaryReads: this.primaryReads,
      replicas: this.replicas.map((r) => ({ replica: r.name, healthy: r.healthy, reads: r.reads })),
    };
  }

  /** Stops the health checks and closes their connections (the replica pools belong to the caller). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.replicas.map((r) => this.dropProbe(r)));
  }

  private async run<T>(query: (sql: Sql) => Promise<T>): Promise<{ value: T; onPrimary: boolean }> {
    const replica = this.pick();
    if (replica) {
      try {
        const value = await this.onReplica(replica, query);
        if (value !== ABANDONED) {
          replica.reads++;
          return { value, onPrimary: false };
        }
      } catch (err) {
        if (meansReplicaDown(err)) {
          this.markDown(replica, errorCode(err) ?? 'error');
          // One dead pooled connection (left over from a restart) does not mean a dead server: probe now, not in 250 ms.
          if (!replica.probing) void this.check(replica);
        } else if (!isExpectedOnReplica(err)) {
          this.onReadFailed({ replica: replica.name, code: errorCode(err), message: String((err as { message?: unknown } | null)?.message ?? err) });
        }
      }
    }
    return { value: await this.onPrimary(query), onPrimary: true };
  }

  private onPrimary<T>(query: (sql: Sql) => Promise<T>): Promise<T> {
    this.primaryReads++;
    return query(this.primary);
  }

  private pick(): Replica | undefined {
    for (let i = 0; i < this.replicas.length; i++) {
      const replica = this.replicas[(this.next + i) % this.replicas.length]!;
      if (replica.healthy) {
        this.next = (this.next + i + 1) % this.replicas.length;
        return replica;
      }
    }
    return undefined;
  }

  /** The query's outcome, or ABANDONED if the replica is marked down first. */
  private onReplica<T>(replica: Replica, query: (sql: Sql) => Promise<T>): Promise<T | typeof ABANDONED> {
    return new Promise((resolve, reject) => {
      const abandon = () => resolve(ABANDONED);
      replica.waiters.add(abandon);
      // An abandoned query still settles later; both handlers are no-ops then.
      query(replica.sql).then(
        (value) => { replica.waiters.delete(abandon); resolve(value); },
        (err) => { replica.waiters.delete(abandon); reject(err); },
      );
    });
  }

  private markDown(replica: Replica, reason: string): void {
    if (!replica.healthy) return;
    replica.healthy = false;
    for (const abandon of replica.waiters) abandon();
    replica.waiters.clear();
    this.onHealthChange({ replica: replica.name, healthy: false, reason });
  }

  private markUp(replica: Replica): void {
    if (replica.healthy) return;
    replica.healthy = true;
    this.onHealthChange({ replica: replica.name, healthy: true });
  }

  private checkAll(): void {
    for (const replica of this.replicas) {
      if (!replica.probing) void this.check(replica);
    }
  }

  private async check(replica: Replica): Promise<void> {
    replica.probing = true;
    replica.probe ??= openProbe(replica.url, 1, 'hds-health');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), this.checkTimeoutMs); });
    try {
      const outcome = await Promise.race([replica.probe`SELECT 1`.then(() => 'ok' as const), timedOut]);
      if (outcome === 'ok') {
        this.markUp(replica);
      } else {
        this.markDown(replica, `no answer within ${this.checkTimeoutMs} ms`);
        // Its one connection may be stuck on a server that does not answer: start afresh next time.
        await this.dropProbe(replica);
      }
    } catch (err) {
      this.markDown(replica, errorCode(err) ?? String(err));
    } finally {
      clearTimeout(timer);
      replica.probing = false;
    }
  }

  private async dropProbe(replica: Replica): Promise<void> {
    const probe = replica.probe;
    replica.probe = undefined;
    await closeProbe(probe);
  }
}

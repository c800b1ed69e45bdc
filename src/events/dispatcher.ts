import type { Sql } from '../db/client.js';
import { errorCode } from '../db/errors.js';
import { MESSAGES_CHANNEL } from '../management/message-store.js';
import { pendingEndpoints } from './claims.js';
import { Lane } from './lane.js';
import { Sender } from './send.js';

/**
 * Delivers the webhook messages (contract section 10) from PostgreSQL, in
 * every instance at once: no broker but the database. Decision:
 * docs/decisions/webhook-delivery-in-postgresql.md.
 *
 * Each endpoint has a lane of its own (./lane.ts), with its own attempts in
 * flight, its own timers and its own rate: a slow or dead endpoint holds
 * only its own lane. Lanes
 * are woken by the NOTIFY of the messages' insert as the change commits,
 * and by a scan of every endpoint every SCAN_EVERY_MS (and whenever the
 * LISTEN connection is made again), which also finds the messages of a
 * dispatcher that died mid-attempt once their lease is over.
 *
 * The server runs it on a worker thread of its own (./delivery-thread.ts),
 * off the event loop that answers requests.
 */

/** What the dispatcher logs: a pino or Fastify logger. */
export interface DeliveryLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

export interface DispatcherOptions {
  /** WEBHOOK_TIMEOUT */
  timeoutMs: number;
  /** WEBHOOK_RETRY_SCHEDULE: the wait before each retry. */
  retryScheduleMs: number[];
  /** WEBHOOK_DISABLE_AFTER */
  disableAfterMs: number;
  /** WEBHOOK_ALLOW_PRIVATE */
  allowPrivate: boolean;
  log: DeliveryLog;
  /** Where the counts go: shared memory when the dispatcher runs on the delivery thread (./delivery-thread.ts). */
  stats?: DeliveryStats;
}

/** Counts since the start, for /metrics. */
export interface DeliveryStats {
  delivered: number;
  /** Attempts that failed, with a retry left. */
  retried: number;
  /** Attempts that failed with no retry left: their messages are `failed`. */
  exhausted: number;
  endpointsDisabled: number;
}

const STAT_FIELDS = ['delivered', 'retried', 'exhausted', 'endpointsDisabled'] as const;

/**
 * DeliveryStats in a SharedArrayBuffer: the Dispatcher on the delivery thread
 * counts, /metrics on the main thread reads them synchronously at a scrape.
 * 64-bit counts: 32 bits would wrap after some days at thousands a second.
 * One thread writes (the dispatcher's), so `++`'s load-then-store loses nothing.
 */
export class SharedDeliveryStats implements DeliveryStats {
  private readonly counts: BigInt64Array;

  constructor(readonly buffer = new SharedArrayBuffer(STAT_FIELDS.length * BigInt64Array.BYTES_PER_ELEMENT)) {
    this.counts = new BigInt64Array(buffer);
  }

  private read(i: number): number { return Number(Atomics.load(this.counts, i)); }
  private write(i: number, n: number): void { Atomics.store(this.counts, i, BigInt(n)); }

  get delivered(): number { return this.read(0); }
  set delivered(n: number) { this.write(0, n); }
  get retried(): number { return this.read(1); }
  set retried(n: number) { this.write(1, n); }
  get exhausted(): number { return this.read(2); }
  set exhausted(n: number) { this.write(2, n); }
  get endpointsDisabled(): number { return this.read(3); }
  set endpointsDisabled(n: number) { this.write(3, n); }
}

const SCAN_EVERY_MS = 2000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class Dispatcher {
  readonly stats: DeliveryStats;
  private readonly lanes = new Map<string, Lane>();
  private readonly sender: Sender;
  private stopped = false;
  /** Past the shutdown's grace: outcomes of attempts still running are not written (their leases end, and they are made again). */
  abandoned = false;
  private listening: { unlisten(): Promise<void> } | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private scanning = false;

  constructor(readonly sql: Sql, readonly options: DispatcherOptions) {
    this.stats = options.stats ?? { delivered: 0, retried: 0, exhausted: 0, endpointsDisabled: 0 };
    this.sender = new Sender({ timeoutMs: options.timeoutMs, allowPrivate: options.allowPrivate });
  }

  /**
   * How long a claim holds a message: past the attempt's timeout with room
   * to write its outcome, so that a live dispatcher never loses the lease of
   * an attempt it makes.
   */
  get leaseMs(): number {
    return 2 * this.options.timeoutMs + 1000;
  }

  get running(): boolean {
    return !this.stopped;
  }

  /** Listens for new messages and looks for due ones now and every SCAN_EVERY_MS. */
  async start(): Promise<void> {
    this.listening = await this.sql.listen(MESSAGES_CHANNEL, (payload) => this.notified(payload), () => void this.scan());
    this.scanTimer = setInterval(() => void this.scan(), SCAN_EVERY_MS);
    this.scanTimer.unref();
  }

  private notified(payload: string): void {
    if (payload === '') return void this.scan();
    for (const id of payload.split(',')) this.lane(id).wake();
  }

  private async scan(): Promise<void> {
    if (this.scanning || this.stopped) return;
    this.scanning = true;
    try {
      for (const { endpoint_id, due_in_ms } of await pendingEndpoints(this.sql)) {
        const lane = this.lane(endpoint_id);
        if (due_in_ms <= 0) lane.wake();
        else lane.wakeIn(due_in_ms);
      }
    } catch (err) {
      this.options.log.warn({ err: { code: errorCode(err), message: (err as Error).message } }, 'could not look for webhook messages');
    } finally {
      this.scanning = false;
    }
  }

  private lane(endpointId: string): Lane {
    let lane = this.lanes.get(endpointId);
    if (!lane) {
      lane = new Lane(endpointId, this, this.sender);
      this.lanes.set(endpointId, lane);
    }
    return lane;
  }

  /** A lane whose endpoint is gone or disabled, with nothing in flight. */
  dropLane(endpointId: string): void {
    this.lanes.get(endpointId)?.halt();
    this.lanes.delete(endpointId);
  }

  /**
   * Stops claiming; waits up to `graceMs` for the attempts in flight and
   * writes their outcomes; past it, drops the rest (their leases end and
   * another instance, or the next start, makes them again, with the same
   * webhook-id).
   */
  async stop(graceMs: number): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.scanTimer);
    // Bounded: with the database unreachable the unlisten would wait for it.
    await Promise.race([this.listening?.unlisten().catch(() => {}), sleep(1000)]);
    const lanes = [...this.lanes.values()];
    for (const lane of lanes) lane.halt();
    const drained = () => Promise.all(lanes.map((lane) => lane.drained()));
    await Promise.race([drained(), sleep(graceMs)]);
    this.abandoned = true;
    this.sender.close();
    await Promise.race([drained(), sleep(1000)]);
  }
}

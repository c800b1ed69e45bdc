import type { Sql } from './client.js';
import { onePerPool, settleBatch, type Pending } from './pending-batch.js';

/**
 * A batch this big is sent at once instead of at the end of the turn, so that
 * PostgreSQL answers one part while this process reads the next requests;
 * smaller batches cost more socket writes than they save.
 * Decision: docs/decisions/lookup-turn-batcher.md
 */
const SEND_AT = 16;

/**
 * Collects the lookups that arrive in one turn of the event loop and answers
 * them with one query per SEND_AT lookups. Under load most of a lookup's
 * cost is the round trip, not the index probe; sharing one among the requests
 * of a turn removes most of it, and adds at most one turn of latency when
 * there is nothing to share.
 */
export class TurnBatcher<Req, Res> {
  private pending: Pending<Req, Res>[] = [];

  /** `run` answers a batch: one result per request, in the requests' order. */
  constructor(private readonly run: (requests: Req[]) => Promise<Res[]>) {}

  load(request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.push({ request, resolve, reject });
      if (waiting === 1) setImmediate(() => this.flush());
      else if (waiting >= SEND_AT) this.flush();
    });
  }

  private flush(): void {
    const batch = this.pending;
    // The end of a turn whose lookups all went out at SEND_AT.
    if (batch.length === 0) return;
    this.pending = [];
    void this.answer(batch);
  }

  private async answer(batch: Pending<Req, Res>[]): Promise<void> {
    const again = await settleBatch(batch, this.run);
    // Each alone, at once: a lookup waits for no other.
    for (const p of again ?? []) void settleBatch([p], this.run);
  }
}

/** One batcher per pool and kind of lookup, made on first use. */
export function batcherFor<Req, Res>(
  batchers: WeakMap<Sql, TurnBatcher<Req, Res>>, sql: Sql, run: (sql: Sql, requests: Req[]) => Promise<Res[]>,
): TurnBatcher<Req, Res> {
  return onePerPool(batchers, sql, () => new TurnBatcher((requests) => run(sql, requests)));
}

import { settleBatch, type Pending } from './pending-batch.js';

/** The requests of a key's next batch, and what was made ready for it meanwhile. */
interface NextBatch<Req, Res, Ready> {
  requests: Pending<Req, Res>[];
  ready?: Ready;
}

/**
 * Runs the requests of one key one batch at a time: a request that arrives
 * while its key's batch is in flight waits, and goes out with all the others
 * that arrived meanwhile (up to `maxBatch`) as the next batch. It is meant
 * for writes PostgreSQL would serialise anyway: every create of a team
 * holds the team's row lock until its commit is on disk, so concurrent
 * creates of one team used to wait for each other's disk flush one by one.
 * A batch shares one statement and one flush. An idle key adds no wait:
 * the first request goes out at once.
 *
 * `prepare`, when given, is called as the first request of a next batch
 * starts waiting, and what it makes is handed to `run` with that batch:
 * what can be done before the batch is known (a transaction begun) is then
 * done while the batch before it is in flight.
 */
export class KeyedBatcher<Req, Res, Ready = never> {
  /** Per key with a batch in flight, the next batch waiting for it. */
  private readonly waiting = new Map<string, NextBatch<Req, Res, Ready>>();

  /** `run` answers a batch of one key: one result per request, in the requests' order. */
  constructor(
    private readonly run: (key: string, requests: Req[], ready: Ready | undefined) => Promise<Res[]>,
    private readonly maxBatch: number,
    private readonly prepare?: (key: string) => Ready | undefined,
  ) {}

  load(key: string, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      const pending = { request, resolve, reject };
      const next = this.waiting.get(key);
      if (next) {
        if (next.requests.length === 0) next.ready = this.prepare?.(key);
        next.requests.push(pending);
        return;
      }
      this.waiting.set(key, { requests: [] });
      void this.drain(key, [pending]);
    });
  }

  private async drain(key: string, first: Pending<Req, Res>[]): Promise<void> {
    const alone = (requests: Req[]) => this.run(key, requests, undefined);
    let batch = first;
    let ready: Ready | undefined;
    for (;;) {
      const again = await settleBatch(batch, (requests) => this.run(key, requests, ready));
      // Alone, one at a time, in order: the key keeps one batch in flight.
      for (const p of again ?? []) await settleBatch([p], alone);
      const next = this.waiting.get(key)!;
      if (next.requests.length === 0) {
        this.waiting.delete(key);
        return;
      }
      batch = next.requests.splice(0, this.maxBatch);
      ready = next.ready;
      next.ready = next.requests.length > 0 ? this.prepare?.(key) : undefined;
    }
  }
}

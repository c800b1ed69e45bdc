import { settleBatch, type Pending } from './pending-batch.js';

/**
 * Runs the requests of one key one batch at a time: a request that arrives
 * while its key's batch is in flight waits, and goes out with all the others
 * that arrived meanwhile (up to `maxBatch`) as the next batch. It is meant
 * for writes PostgreSQL would serialise anyway: every create of a team
 * holds the team's row lock until its commit is on disk, so concurrent
 * creates of one team used to wait for each other's disk flush one by one.
 * A batch shares one statement and one flush. An idle key adds no wait:
 * the first request goes out at once.
 */
export class KeyedBatcher<Req, Res> {
  /** Per key with a batch in flight, the requests waiting for the next one. */
  private readonly waiting = new Map<string, Pending<Req, Res>[]>();

  /** `run` answers a batch of one key: one result per request, in the requests' order. */
  constructor(private readonly run: (key: string, requests: Req[]) => Promise<Res[]>, private readonly maxBatch: number) {}

  load(key: string, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      const pending = { request, resolve, reject };
      const queue = this.waiting.get(key);
      if (queue) {
        queue.push(pending);
        return;
      }
      this.waiting.set(key, []);
      void this.drain(key, [pending]);
    });
  }

  private async drain(key: string, first: Pending<Req, Res>[]): Promise<void> {
    const run = (requests: Req[]) => this.run(key, requests);
    let batch = first;
    for (;;) {
      const again = await settleBatch(batch, run);
      // Alone, one at a time, in order: the key keeps one batch in flight.
      for (const p of again ?? []) await settleBatch([p], run);
      const queue = this.waiting.get(key)!;
      if (queue.length === 0) {
        this.waiting.delete(key);
        return;
      }
      batch = queue.splice(0, this.maxBatch);
    }
  }
}

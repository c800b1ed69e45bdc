import type { Sql } from './client.js';
import { isDataException } from './errors.js';

/** What the batchers (./turn-batcher.ts, ./keyed-batcher.ts) share. */

/** A request waiting for its batch's answer. */
export interface Pending<Req, Res> {
  request: Req;
  resolve(result: Res): void;
  reject(err: unknown): void;
}

/**
 * Runs a batch and settles each request with its own result, or every one
 * with the batch's failure. Except when PostgreSQL refused a value: that
 * belongs to one request, which may be another team's than the rest, so the
 * requests are returned, for the caller to run each again alone and fail
 * only its own. (Validation should catch such values; a uuid with a urn:
 * prefix once got through and failed whole batches.) Other failures, the
 * database gone say, are everyone's, and asked again a write could be done
 * twice.
 */
export async function settleBatch<Req, Res>(batch: Pending<Req, Res>[], run: (requests: Req[]) => Promise<Res[]>): Promise<Pending<Req, Res>[] | undefined> {
  try {
    const results = await run(batch.map((p) => p.request));
    batch.forEach((p, i) => p.resolve(results[i]!));
  } catch (err) {
    if (batch.length > 1 && isDataException(err)) return batch;
    for (const p of batch) p.reject(err);
  }
  return undefined;
}

/** The one `made` for this pool, made on first use. */
export function onePerPool<T>(made: WeakMap<Sql, T>, sql: Sql, make: () => T): T {
  let one = made.get(sql);
  if (!one) made.set(sql, (one = make()));
  return one;
}

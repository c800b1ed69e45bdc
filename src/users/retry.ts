import { isDeadlock } from '../db/errors.js';

const TRIES = 4;

/**
 * Runs a write again when PostgreSQL broke a deadlock by failing it. Writes
 * of one team lock its row and users' rows, and two can meet in the other
 * order (a create of a client_user_id that a concurrent delete or undo is
 * releasing or taking, two patches swapping client_user_ids): rare, and
 * harmless to run again, since the failed write left nothing behind.
 * `alsoWhen`: other failures the caller knows a next try can get past.
 */
export async function retryingDeadlocks<T>(write: () => Promise<T>, alsoWhen: (err: unknown) => boolean = () => false): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!(isDeadlock(err) || alsoWhen(err)) || attempt >= TRIES) throw err;
    }
  }
}

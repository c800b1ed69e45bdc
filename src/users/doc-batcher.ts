import type { Sql } from '../db/client.js';
import type { UserDoc } from './queries.js';

interface Pending {
  teamId: string;
  userId: string;
  resolve(doc: UserDoc | undefined): void;
  reject(err: unknown): void;
}

const MAX_BATCH = 256;

/**
 * Collects the get-by-id lookups that arrive in one turn of the event loop
 * and answers them with one query. Under load most of a lookup's cost is the
 * round trip (two process wake-ups, protocol framing), not the index probe;
 * sharing one round trip among the requests of a turn removes most of it,
 * and adds at most one turn of latency when there is nothing to share.
 * Each lookup matches on (team_id, user_id) in SQL: a batch mixing teams can
 * never hand one team another's user.
 */
class DocBatcher {
  private pending: Pending[] = [];

  constructor(private readonly sql: Sql) {}

  load(teamId: string, userId: string): Promise<UserDoc | undefined> {
    return new Promise((resolve, reject) => {
      if (this.pending.push({ teamId, userId, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    for (let i = 0; i < batch.length; i += MAX_BATCH) void this.run(batch.slice(i, i + MAX_BATCH));
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      const rows = await this.sql`
        SELECT u.team_id, u.user_id, u.doc
        FROM unnest(${batch.map((p) => p.teamId)}::uuid[], ${batch.map((p) => p.userId)}::uuid[]) AS k(team_id, user_id)
        JOIN users u ON u.user_id = k.user_id AND u.team_id = k.team_id`.raw() as Buffer[][];
      const found = new Map<string, UserDoc>();
      for (const [team, user, doc] of rows) found.set(`${team!.toString()}/${user!.toString()}`, { user_id: user!.toString(), doc: doc! });
      // Ids compare in PostgreSQL's lower-case form: the route accepts upper-case UUIDs too.
      for (const p of batch) p.resolve(found.get(`${p.teamId.toLowerCase()}/${p.userId.toLowerCase()}`));
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }
}

const batchers = new WeakMap<Sql, DocBatcher>();

/** The user `userId` of team `teamId`, looked up together with the other lookups of this turn on the same pool. */
export function findUserDocBatched(sql: Sql, teamId: string, userId: string): Promise<UserDoc | undefined> {
  let batcher = batchers.get(sql);
  if (!batcher) batchers.set(sql, (batcher = new DocBatcher(sql)));
  return batcher.load(teamId, userId);
}

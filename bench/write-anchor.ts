/**
 * The anchor of a write scenario: the service's own function for the write
 * (src/users: the same statements and commits) called from the bench on
 * the scenario's connections, with no HTTP, for the same warm-up and
 * duration. A write's rate is bounded by the database's commits, which
 * differ by machine up to 3x: the ratio to this anchor, measured in the
 * same rounds, is what compares across machines (the guide's rule for an
 * absolute target). Answers a second: a delete-undo pair counts two, as the
 * load counts them.
 */
import { connect, type Sql } from '../src/db/client.js';
import { createUser } from '../src/users/create.js';
import { deleteUser, undoDelete } from '../src/users/deletion.js';
import { patchUser } from '../src/users/patch.js';
import { resultOf } from './anchor.js';
import { Histogram } from './latency.js';
import type { LoadResult } from './load-plan.js';
import { timedLoop } from './timed-loop.js';

export type WriteKind = 'patch' | 'delete-undo' | 'create';

/** The team written to, and what its writes need. */
export interface WriteTeam {
  teamId: string;
  /** A key of the team: a deletion records the key that made it. */
  keyId: string;
  /** Users the writes pick from (patch, delete-undo); a create makes its own. */
  ids: string[];
  /** Time zones a patch sets, one at random each time. */
  zones: string[];
  /** Prefix of the client_user_id of the users a create makes. */
  clientUserIdPrefix: string;
}

/** A delete is undone within it: nothing is purged while the bench runs. */
const GRACE_MS = 30 * 86_400_000;

/** The write of `kind` on one user (`id`, none for a create), and how many answers of the load it stands for. */
function writeOf(kind: WriteKind, team: WriteTeam): { answers: number; write: (sql: Sql, id: string) => Promise<unknown> } {
  let created = 0;
  switch (kind) {
    case 'patch':
      return { answers: 1, write: (sql, id) => patchUser(sql, team.teamId, id, { fallback_time_zone: team.zones[Math.floor(Math.random() * team.zones.length)]! }) };
    case 'delete-undo':
      return {
        answers: 2,
        write: async (sql, id) => {
          await deleteUser(sql, team.teamId, id, team.keyId, GRACE_MS);
          await undoDelete(sql, team.teamId, { user_id: id });
        },
      };
    case 'create':
      return { answers: 1, write: (sql) => createUser(sql, team.teamId, { client_user_id: `${team.clientUserIdPrefix}direct-${Date.now()}-${created++}` }) };
  }
}

/**
 * The write of `kind` on `connections` connections to `url` for `warmupMs`
 * and then `seconds`; as the load's delete-undo does, no two connections
 * write the same user at once.
 */
export async function runWriteAnchor(url: string, kind: WriteKind, team: WriteTeam, connections: number, warmupMs: number, seconds: number): Promise<LoadResult> {
  const { answers, write } = writeOf(kind, team);
  if (kind !== 'create' && team.ids.length <= connections) throw new Error(`the ${kind} anchor needs more users than its ${connections} connections`);
  const sql = connect(url, { max: connections });
  const busy = new Set<string>();
  const pick = () => {
    if (kind === 'create') return '';
    let id = team.ids[Math.floor(Math.random() * team.ids.length)]!;
    while (busy.has(id)) id = team.ids[Math.floor(Math.random() * team.ids.length)]!;
    busy.add(id);
    return id;
  };
  try {
    const durations = await timedLoop(connections, warmupMs, seconds, async () => {
      const id = pick();
      try {
        await write(sql, id);
      } finally {
        busy.delete(id);
      }
    });
    const times = new Histogram();
    for (const ms of durations) for (let i = 0; i < answers; i++) times.add(ms / answers);
    return resultOf(times, durations.length * answers, seconds, 0);
  } finally {
    await sql.end();
  }
}

import type { Sql } from '../db/client.js';
import { setNewest } from '../bounded-map.js';

/**
 * Where a page of a team with holes starts, found in memory rather than by
 * PostgreSQL.
 *
 * A team whose positions have holes (users deleted, migrations/005) made
 * PostgreSQL find each page's start: a walk of the team's tree, read from
 * TOAST, then the page's bucket's holes (migrations/007 and 008). With a
 * tenth of the biggest team deleted, a random page cost it about 1.3 times
 * one of the same team before (figures: `git show a7fc7f5:CHANGELOG.md`). Yet the
 * start depends only on the team's holes, and those change only when the
 * team's version does (migrations/003). So each process keeps, per team it
 * has listed, the team's holes at one version, and hands the page statement
 * the start it computed together with that version. The statement uses the
 * start only while the team is still at that version, and otherwise finds
 * it itself (findUserPage in ./queries.ts): holes kept too long cost a
 * page nothing but the comparison, never a wrong page.
 *
 * The rule this relies on: every write that changes a team's live positions
 * raises its version in the same transaction, which the page cache relies
 * on as well. test/list-after-changes.test.ts pages through holes kept
 * from memory after every kind of write.
 */

/** A start computed from holes kept at `version`, for findUserPage. */
export interface KnownStart {
  version: string;
  start: number;
}

/** A team's holes at a version: its positions below next_position that no live user holds, ascending. */
interface TeamHoles {
  version: string;
  holes: Float64Array;
}

/**
 * Holes kept, summed over teams: 8 bytes each (8 MB in all). A tenth of a
 * team of 500,000 users deleted is 50,000 holes. A team with more holes
 * than this is not kept and keeps being paged by PostgreSQL alone.
 */
const HOLES_KEPT = 1_000_000;

/**
 * A load reads all of a team's holes (about 20 ms for 50,000 of them). A
 * team whose version keeps moving would be loaded again and again: the next
 * load of a team waits until the loads have taken at most a tenth of the
 * time since the first.
 */
const LOAD_SHARE = 0.1;

/** Teams whose last load is remembered for the pacing; past it the least recently loaded is forgotten. */
const TEAMS_PACED = 10_000;

interface Loading {
  /** Set while a load runs. */
  running?: Promise<void>;
  /** When the last load ended, and how long it took (ms). */
  endedAt: number;
  tookMs: number;
}

/** The team's version and holes, read in one snapshot; undefined when the team does not exist. */
export async function findTeamHoles(sql: Sql, teamId: string): Promise<TeamHoles | undefined> {
  const [row] = await sql<{ version: string; holes: string }[]>`
    SELECT t.version::text AS version,
           coalesce((SELECT string_agg(((h.bucket - 1)::bigint * list_bucket_size() + x.o + 1)::text, ',' ORDER BY h.bucket, x.o)
                     FROM list_holes h CROSS JOIN LATERAL unnest(h.holes) AS x(o)
                     WHERE h.team_id = t.team_id), '') AS holes
    FROM teams t WHERE t.team_id = ${teamId}`;
  if (!row) return undefined;
  return { version: row.version, holes: Float64Array.from(row.holes === '' ? [] : row.holes.split(','), Number) };
}

/**
 * The position of the user at `offset` (0-based, in list order) among
 * positions with these holes: offset + 1 + the number of holes before it.
 * The k-th hole (1-based) has holes[k] - k live users before it, which
 * never decreases with k: a binary search finds how many holes have at most
 * `offset` live users before them.
 */
export function startAmongHoles(holes: Float64Array, offset: number): number {
  let low = 0;
  let high = holes.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (holes[mid]! - (mid + 1) <= offset) low = mid + 1;
    else high = mid;
  }
  return offset + 1 + low;
}

/** Teams' holes kept in this process, each at the version it was read at. */
export class KnownHoles {
  /** By most recently loaded last. */
  private readonly byTeam = new Map<string, TeamHoles>();
  private readonly loads = new Map<string, Loading>();
  private kept = 0;

  constructor(private readonly load: (teamId: string) => Promise<TeamHoles | undefined>) {}

  /** The start of the page at `offset`, computed from the team's holes at the version they were read at; none when not kept. */
  startOf(teamId: string, offset: number): KnownStart | undefined {
    const known = this.byTeam.get(teamId);
    return known && { version: known.version, start: startAmongHoles(known.holes, offset) };
  }

  /**
   * A page of the team was read at `version`. When the team has holes and
   * they are not kept at that version, loads them (in the background: the
   * page is answered already), at most one load per team at a time and
   * paced by LOAD_SHARE.
   */
  pageRead(teamId: string, version: string, holed: boolean): void {
    const known = this.byTeam.get(teamId);
    if (!holed) {
      if (known) this.drop(teamId);
      return;
    }
    if (known?.version === version) return;
    const loading = this.loads.get(teamId);
    const now = performance.now();
    if (loading && (loading.running || now - loading.endedAt < loading.tookMs * (1 / LOAD_SHARE - 1))) return;
    const running = this.load(teamId).then(
      (holes) => {
        this.drop(teamId);
        if (holes && holes.holes.length <= HOLES_KEPT) this.keep(teamId, holes);
      },
      // A failed load only leaves the pages to PostgreSQL; the next page read tries again, paced.
      () => this.drop(teamId),
    ).finally(() => {
      const endedAt = performance.now();
      setNewest(this.loads, teamId, { endedAt, tookMs: endedAt - now }, TEAMS_PACED);
    });
    setNewest(this.loads, teamId, { running, endedAt: 0, tookMs: 0 }, TEAMS_PACED);
  }

  private keep(teamId: string, holes: TeamHoles): void {
    for (const oldest of this.byTeam.keys()) {
      if (this.kept + holes.holes.length <= HOLES_KEPT) break;
      this.drop(oldest);
    }
    this.byTeam.set(teamId, holes);
    this.kept += holes.holes.length;
  }

  private drop(teamId: string): void {
    const known = this.byTeam.get(teamId);
    if (!known) return;
    this.byTeam.delete(teamId);
    this.kept -= known.holes.length;
  }
}

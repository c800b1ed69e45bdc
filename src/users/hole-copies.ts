import { setNewest } from '../bounded-map.js';
import type { HoleLives, KnownStart, TeamHoles } from './queries.js';

/** The team's pages that started without a copy since it was last loaded or found stale. */
interface Misses {
  pages: number;
  loading: boolean;
}

/**
 * A page of a team with holes without a copy costs one list_page_start
 * (about 30 µs); a load of the copy costs about 0.1 µs a hole
 * (docs/decisions/page-statement.md). So a team's copy is loaded once
 * holes / HOLES_PER_START of its pages started without one: a team whose
 * holes change faster than its pages are read spends on loads about what
 * those pages spent on their starts, never much more.
 */
const HOLES_PER_START = 256;
/** Teams whose pages without a copy are counted; past it the least recently counted is forgotten. */
const TEAMS_COUNTED = 10_000;

/**
 * Copies of teams' holes in memory, each tagged with the version of the
 * holes it was read at (teams.holes_version), from which a page's start is
 * worked out without PostgreSQL's list_page_start. The page statement uses
 * the start only while the team's holes are still at that version, so a
 * stale copy costs a fallback, never a wrong page. At most `maxHoles` holes
 * are kept, the least recently used team dropped first.
 */
export class HoleCopies {
  private readonly copies = new Map<string, HoleLives>();
  private readonly misses = new Map<string, Misses>();
  private kept = 0;
  /** Pages of teams with holes whose start came from a copy, and from list_page_start: live counters for /metrics. */
  copied = 0;
  computed = 0;

  constructor(private readonly maxHoles: number) {}

  /**
   * The start of the page at `offset` from the team's copy, if there is one:
   * offset + 1 + the holes before the user at `offset`, those whose live
   * users before them are at most `offset`.
   */
  startOf(teamId: string, offset: number): KnownStart | undefined {
    const copy = this.copies.get(teamId);
    if (!copy) return undefined;
    this.copies.delete(teamId);
    this.copies.set(teamId, copy);
    return { holesVersion: copy.holesVersion, start: offset + 1 + countAtMost(copy.lives, offset) };
  }

  /**
   * What a page read of the team's holes (none: the team has none) while
   * `used` was its start: a copy of other holes is dropped, and once enough
   * of the team's pages started without a copy, `load` reads one (one load
   * at a time per team, never awaited by the page).
   */
  seen(teamId: string, holes: TeamHoles | undefined, used: KnownStart | undefined, load: () => Promise<HoleLives | undefined>): void {
    if (!holes) {
      this.drop(teamId);
      this.misses.delete(teamId);
      return;
    }
    if (used && used.holesVersion === holes.version) {
      this.copied += 1;
      return;
    }
    this.computed += 1;
    const copy = this.copies.get(teamId);
    if (copy && copy.holesVersion !== holes.version) this.drop(teamId);
    if (holes.count > this.maxHoles) return;
    const misses = this.misses.get(teamId) ?? { pages: 0, loading: false };
    setNewest(this.misses, teamId, misses, TEAMS_COUNTED);
    misses.pages += 1;
    if (misses.loading || misses.pages < holes.count / HOLES_PER_START) return;
    misses.loading = true;
    load().then((loaded) => {
      if (loaded) this.keep(teamId, loaded);
    }, () => {
      // A failed load leaves the team without a copy: its pages fall back to list_page_start, as before it.
    }).finally(() => {
      misses.pages = 0;
      misses.loading = false;
    });
  }

  private keep(teamId: string, copy: HoleLives): void {
    this.drop(teamId);
    if (copy.lives.length > this.maxHoles) return;
    for (const [oldest, old] of this.copies) {
      if (this.kept + copy.lives.length <= this.maxHoles) break;
      this.drop(oldest, old);
    }
    this.copies.set(teamId, copy);
    this.kept += copy.lives.length;
  }

  private drop(teamId: string, copy = this.copies.get(teamId)): void {
    if (!copy) return;
    this.copies.delete(teamId);
    this.kept -= copy.lives.length;
  }
}

/** How many elements of the ascending `values` are at most `limit` (a bisection). */
function countAtMost(values: Float64Array, limit: number): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (values[middle]! <= limit) low = middle + 1;
    else high = middle;
  }
  return low;
}

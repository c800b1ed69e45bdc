import type { UserPage } from './queries.js';

/** How many pages missed once while the cache was full are remembered (their keys only). */
const REMEMBERED_MISSES = 1024;

/**
 * List pages kept in memory, least recently used first out, bounded by
 * their bytes. An entry is only a candidate: the page query compares its
 * version with the team's current one in PostgreSQL on every request and
 * reads the page again when they differ (src/users/queries.ts), so a page
 * is never served stale, across instances and replicas too. Keyed by team:
 * one team's entry can never answer another team's request.
 *
 * What it saves on a repeated page: the page's rows in PostgreSQL and their
 * bytes through the driver, and a new body buffer (which, at list sizes, is
 * what drove garbage collection).
 *
 * Once full, it keeps a page only on its second miss. A scan of pages each
 * read once (random offsets, a team paged through nightly) would otherwise
 * push out the pages that are asked for again, for pages that are not, and
 * each page pushed out is a body buffer left for the garbage collector, held
 * in the process's memory until V8 collects its old generation
 * (docs/scaling.md).
 */
export class PageCache {
  private readonly entries = new Map<string, UserPage>();
  /** Keys of pages missed once while the cache was full, oldest first. */
  private readonly missedOnce = new Set<string>();
  private bytes = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly maxBytes: number) {}

  private static key(teamId: string, offset: number, limit: number): string {
    return `${teamId}/${offset}/${limit}`;
  }

  get(teamId: string, offset: number, limit: number): UserPage | undefined {
    if (this.maxBytes === 0) return undefined;
    return this.entries.get(PageCache.key(teamId, offset, limit));
  }

  /** Records a hit and marks the entry as the most recently used. */
  served(teamId: string, offset: number, limit: number, page: UserPage): void {
    this.hits++;
    const key = PageCache.key(teamId, offset, limit);
    this.entries.delete(key);
    this.entries.set(key, page);
  }

  /**
   * Records a miss (no entry, or an entry of an older version) and keeps the
   * page read instead: a copy of its body, as the body read lies in a buffer
   * used again once its answer is sent (src/http/fast-path/answer-buffers.ts).
   */
  store(teamId: string, offset: number, limit: number, page: UserPage): void {
    this.misses++;
    if (page.body.length > this.maxBytes) return;
    const key = PageCache.key(teamId, offset, limit);
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.bytes -= old.body.length;
    } else if (this.bytes + page.body.length > this.maxBytes && !this.seenBefore(key)) {
      return;
    }
    this.entries.set(key, { body: Buffer.from(page.body), auditIds: page.auditIds, version: page.version });
    this.bytes += page.body.length;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.body.length;
    }
  }

  /** True on a key's second miss; remembers it on its first. */
  private seenBefore(key: string): boolean {
    if (this.missedOnce.delete(key)) return true;
    this.missedOnce.add(key);
    if (this.missedOnce.size > REMEMBERED_MISSES) this.missedOnce.delete(this.missedOnce.values().next().value!);
    return false;
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}

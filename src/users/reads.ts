import type { ReadRouter } from '../db/read-router.js';
import { AnswerBuffers } from '../http/fast-path/answer-buffers.js';
import { findTeamVersionBatched, findUserDocBatched } from './batched-lookups.js';
import { HoleCopies } from './hole-copies.js';
import { PageCache } from './page-cache.js';
import { findHoleLives, findUserDocByClientUserId, findUserPage, isScheduledForDeletion, searchUserDocs, type UserDoc, type UserPage } from './queries.js';
import { currentWeek, teamMetrics, type TeamMetrics, type TeamMetricsRead } from './team-metrics.js';
import { setNewest } from '../bounded-map.js';
import { isUuid } from '../user-document/rules.js';

/** Enough free page buffers for 32 pages of 500 users at once; a page buffer is at most 512 KB. */
const PAGE_BUFFERS_KEPT = 16 * 1024 * 1024;
/** Teams whose metrics are kept (about 1 KB each); past it the least recently read is dropped. */
const METRICS_KEPT = 10_000;
/** Holes kept in copies (8 bytes each, so 8 MB): a tenth of a team of ten million deleted. */
const HOLES_KEPT = 1_000_000;

/**
 * Every read of the user resource: "page P of team T", "user U of team T",
 * "the user of team T with client_user_id C". It owns where each read runs
 * (a replica or the primary, src/db/read-router.ts), the page cache and its
 * version check, and the queries; route handlers call it and send the bytes
 * it returns. Each answer is the stored JSON as PostgreSQL holds it.
 */
export class UserReads {
  private readonly pages: PageCache;
  private readonly holes = new HoleCopies(HOLES_KEPT);
  /** The last metrics read of each team, by most recent read last. */
  private readonly metricsByTeam = new Map<string, TeamMetricsRead>();
  /** The buffers pages read from PostgreSQL are written in; the route gives each back once its answer is sent. */
  readonly pageBuffers = new AnswerBuffers(PAGE_BUFFERS_KEPT);

  constructor(private readonly router: ReadRouter, pageCacheBytes: number) {
    this.pages = new PageCache(pageCacheBytes);
  }

  /**
   * The page (offset, offset + limit] of the team's users in list order, with
   * the total; undefined when the team does not exist. A page from memory
   * while the team's version (one batched lookup) is still the one it was
   * read at; otherwise from PostgreSQL, kept for next time. A page
   * of version v is what every snapshot at version v shows, so the two reads
   * need not share a snapshot or a replica.
   */
  async page(teamId: string, offset: number, limit: number): Promise<UserPage | undefined> {
    const known = this.pages.get(teamId, offset, limit);
    if (known) {
      const version = await this.teamVersion(teamId);
      if (version === undefined) return undefined;
      if (version === known.version) {
        this.pages.served(teamId, offset, limit, known);
        return known;
      }
    }
    const start = this.holes.startOf(teamId, offset);
    const page = await this.router.read((sql) => findUserPage(sql, teamId, offset, limit, this.pageBuffers, start));
    if (page) {
      this.pages.store(teamId, offset, limit, page);
      this.holes.seen(teamId, page.holes, start, () => this.router.read((sql) => findHoleLives(sql, teamId)));
    }
    return page;
  }

  /** The team's user `userId`. A replica may lag behind a create that just happened: a miss there is confirmed on the primary. */
  byId(teamId: string, userId: string): Promise<UserDoc | undefined> {
    return this.router.readConfirmed((sql) => findUserDocBatched(sql, teamId, userId));
  }

  /** Whether the team has scheduled the user `userId` for deletion: read on the primary, where deletions are written. */
  isScheduledForDeletion(teamId: string, userId: string): Promise<boolean> {
    return isScheduledForDeletion(this.router.primary, teamId, userId);
  }

  /** The team's live users whose user_id or client_user_id is `query`. */
  search(teamId: string, query: string): Promise<UserDoc[]> {
    return this.router.read((sql) => searchUserDocs(sql, teamId, query, isUuid(query)));
  }

  /**
   * The team's counts for GET /v2/user/metrics; undefined when the team does
   * not exist. Like a page: from memory while the team's version (one batched
   * lookup) and the week are those they were read at, since every write that
   * changes a count changes the version in the same transaction; otherwise
   * from PostgreSQL.
   */
  async metrics(teamId: string): Promise<TeamMetrics | undefined> {
    const known = this.metricsByTeam.get(teamId);
    if (known && known.week === currentWeek()) {
      const version = await this.teamVersion(teamId);
      if (version === undefined) return undefined;
      if (version === known.version) {
        setNewest(this.metricsByTeam, teamId, known, METRICS_KEPT);
        return known.metrics;
      }
    }
    const read = await this.router.read((sql) => teamMetrics(sql, teamId));
    if (!read) {
      this.metricsByTeam.delete(teamId);
      return undefined;
    }
    setNewest(this.metricsByTeam, teamId, read, METRICS_KEPT);
    return read.metrics;
  }

  /**
   * The team's version (one batched lookup), which every write changes in
   * its own transaction: what a page or metrics kept in memory are checked
   * against. Undefined when the team does not exist.
   */
  private teamVersion(teamId: string): Promise<string | undefined> {
    return this.router.read((sql) => findTeamVersionBatched(sql, teamId));
  }

  /** The team's user whose client_user_id is `clientUserId`, confirmed on the primary like byId(). */
  byClientUserId(teamId: string, clientUserId: string): Promise<UserDoc | undefined> {
    return this.router.readConfirmed((sql) => findUserDocByClientUserId(sql, teamId, clientUserId));
  }

  /** Pages answered from memory and from the database: live counters, read by the metrics at scrape time. */
  get pageStats(): { readonly hits: number; readonly misses: number } {
    return this.pages;
  }

  /** Pages read from the database for teams with holes, by where their start came from: live counters, as pageStats. */
  get holeStartStats(): { readonly copied: number; readonly computed: number } {
    return this.holes;
  }
}

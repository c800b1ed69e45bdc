import { setNewest } from '../bounded-map.js';
import type { Sql } from '../db/client.js';
import { hashKeyText, isWellFormedKey } from './api-key.js';
import { findKeyByHash, recordKeyUse, type KeyRecord } from './key-store.js';

export interface Caller {
  teamId: string;
  keyId: string;
}

interface CacheEntry {
  record: KeyRecord | undefined;
  fetchedAt: number;
}

const MAX_ENTRIES = 10_000;

/** verifyCached()'s answer when only a database lookup can tell: call verifyByLookup(). */
export const KEY_NOT_CACHED = Symbol('key not cached');

/**
 * Verifies API keys. A key's record is kept in memory for at most `ttlMs`
 * (under a second), so a revocation made on any instance is seen by all
 * within that time, while a busy key costs one lookup per `ttlMs` instead of
 * one per request. Expiry is checked against the clock on every request.
 * Decision: docs/decisions/api-key-hashing-and-cache.md
 */
export class KeyVerifier {
  private readonly cache = new Map<string, CacheEntry>();
  /**
   * Well-formed keys refused at their last check, by the key as presented,
   * with when that was: a flood of one unknown or revoked key is then refused
   * without hashing it each time (the hash was the largest part of such a
   * refusal's own cost). A refused key opens nothing, so keeping it as sent
   * gives nothing away; accepted keys are only ever held as their hash.
   */
  private readonly refused = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<CacheEntry>>();
  /** Last use per key id, as epoch ms (a Date per request would be garbage): written by flushUses(). */
  private readonly uses = new Map<string, number>();
  /** Database lookups (cache misses), and verification outcomes: read by src/http/metrics.ts. */
  lookups = 0;
  accepted = 0;
  rejected = 0;

  constructor(private readonly sql: Sql, private readonly ttlMs: number) {}

  /**
   * The caller the key stands for, or undefined when it is refused, when that
   * is known now: a missing or malformed key, or one looked up less than
   * `ttlMs` ago. KEY_NOT_CACHED otherwise: then verifyByLookup() answers.
   * Two functions rather than one returning a value or a promise: the common
   * case costs no promise and no microtask turn, and no caller has to test
   * which of the two it got.
   */
  verifyCached(presented: string | undefined): Caller | undefined | typeof KEY_NOT_CACHED {
    if (presented === undefined || !isWellFormedKey(presented)) return this.outcome(undefined);
    const now = Date.now();
    const refusedAt = this.refused.get(presented);
    if (refusedAt !== undefined && now - refusedAt < this.ttlMs) return this.outcome(undefined);
    const hit = this.cache.get(hashKeyText(presented));
    if (hit && now - hit.fetchedAt < this.ttlMs) return this.judge(presented, hit, now);
    return KEY_NOT_CACHED;
  }

  /** The caller the key stands for, or undefined when it is refused, looked up in the database (one lookup per key at a time). */
  async verifyByLookup(presented: string): Promise<Caller | undefined> {
    if (!isWellFormedKey(presented)) return this.outcome(undefined);
    const entry = await this.fetch(hashKeyText(presented));
    return this.judge(presented, entry, Date.now());
  }

  /** The caller of a looked-up key; a refusal is remembered for as long as the entry it was read from. */
  private judge(presented: string, entry: CacheEntry, now: number): Caller | undefined {
    const caller = this.callerOf(entry.record, now);
    if (!caller) setNewest(this.refused, presented, entry.fetchedAt, MAX_ENTRIES);
    return this.outcome(caller);
  }

  private outcome(caller: Caller | undefined): Caller | undefined {
    if (caller) this.accepted++;
    else this.rejected++;
    return caller;
  }

  private callerOf(record: KeyRecord | undefined, now: number): Caller | undefined {
    if (!record || record.revokedAt || (record.expiresAt && record.expiresAt.getTime() <= now)) return undefined;
    this.uses.set(record.keyId, now);
    return { teamId: record.teamId, keyId: record.keyId };
  }

  private fetch(id: string): Promise<CacheEntry> {
    let pending = this.inflight.get(id);
    if (!pending) {
      const fetchedAt = Date.now();
      this.lookups++;
      pending = findKeyByHash(this.sql, Buffer.from(id, 'base64'))
        .then((record) => {
          const entry = { record, fetchedAt };
          setNewest(this.cache, id, entry, MAX_ENTRIES);
          return entry;
        })
        .finally(() => this.inflight.delete(id));
      this.inflight.set(id, pending);
    }
    return pending;
  }

  /** Writes the last-used times gathered since the previous flush. */
  async flushUses(): Promise<void> {
    if (this.uses.size === 0) return;
    const batch = new Map([...this.uses].map(([keyId, at]) => [keyId, new Date(at)]));
    this.uses.clear();
    await recordKeyUse(this.sql, batch);
  }
}


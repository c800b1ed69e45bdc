import { setNewest } from '../bounded-map.js';
import type { Sql } from '../db/client.js';
import { hashKeyText, isWellFormedKey, isWellFormedManagementKey } from './api-key.js';
import {
  findKeyByHash, findManagementKeyByHash, recordKeyUse, recordManagementKeyUse, type KeyRecord, type ManagementKeyRecord,
} from './key-store.js';

/** Who a team key stands for. */
export interface Caller {
  teamId: string;
  keyId: string;
}

/** Who a management key stands for: the organisation, through one of its keys. */
export interface ManagementCaller {
  orgId: string;
  keyId: string;
}

/** What the verifier reads of any stored key. */
interface StoredKey {
  keyId: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/** One kind of key: its shape, where it is stored, and who a valid one stands for. */
interface KeyKind<R extends StoredKey, C> {
  isWellFormed(value: string): boolean;
  find(sql: Sql, hash: Buffer): Promise<R | undefined>;
  recordUse(sql: Sql, uses: Map<string, Date>): Promise<void>;
  callerOf(record: R): C;
}

const TEAM_KEYS: KeyKind<KeyRecord, Caller> = {
  isWellFormed: isWellFormedKey,
  find: findKeyByHash,
  recordUse: recordKeyUse,
  callerOf: (record) => ({ teamId: record.teamId, keyId: record.keyId }),
};

const MANAGEMENT_KEYS: KeyKind<ManagementKeyRecord, ManagementCaller> = {
  isWellFormed: isWellFormedManagementKey,
  find: findManagementKeyByHash,
  recordUse: recordManagementKeyUse,
  callerOf: (record) => ({ orgId: record.orgId, keyId: record.keyId }),
};

interface CacheEntry<R> {
  record: R | undefined;
  fetchedAt: number;
}

const MAX_ENTRIES = 10_000;

/** verifyCached()'s answer when only a database lookup can tell: call verifyByLookup(). */
export const KEY_NOT_CACHED = Symbol('key not cached');

/**
 * Verifies keys of one kind (team keys: KeyVerifier; management keys:
 * ManagementKeyVerifier, the same mechanism). A key's record is kept in memory for at most `ttlMs`
 * (under a second), so a revocation made on any instance is seen by all
 * within that time, while a busy key costs one lookup per `ttlMs` instead of
 * one per request. Expiry is checked against the clock on every request.
 * Decision: docs/decisions/api-key-hashing-and-cache.md
 */
class CachedKeyVerifier<R extends StoredKey, C> {
  private readonly cache = new Map<string, CacheEntry<R>>();
  /**
   * Well-formed keys refused at their last check, by the key as presented,
   * with when that was: a flood of one unknown or revoked key is then refused
   * without hashing it each time (the hash was the largest part of such a
   * refusal's own cost). A refused key opens nothing, so keeping it as sent
   * gives nothing away; accepted keys are only ever held as their hash.
   */
  private readonly refused = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<CacheEntry<R>>>();
  /** Last use per key id, as epoch ms (a Date per request would be garbage): written by flushUses(). */
  private readonly uses = new Map<string, number>();
  /** Database lookups (cache misses), and verification outcomes: read by src/http/metrics.ts. */
  lookups = 0;
  accepted = 0;
  rejected = 0;

  constructor(private readonly sql: Sql, private readonly ttlMs: number, private readonly kind: KeyKind<R, C>) {}

  /**
   * The caller the key stands for, or undefined when it is refused, when that
   * is known now: a missing or malformed key, or one looked up less than
   * `ttlMs` ago. KEY_NOT_CACHED otherwise: then verifyByLookup() answers.
   * Two functions rather than one returning a value or a promise: the common
   * case costs no promise and no microtask turn, and no caller has to test
   * which of the two it got.
   */
  verifyCached(presented: string | undefined): C | undefined | typeof KEY_NOT_CACHED {
    if (presented === undefined || !this.kind.isWellFormed(presented)) return this.outcome(undefined);
    const now = Date.now();
    const refusedAt = this.refused.get(presented);
    if (refusedAt !== undefined && now - refusedAt < this.ttlMs) return this.outcome(undefined);
    const hit = this.cache.get(hashKeyText(presented));
    if (hit && now - hit.fetchedAt < this.ttlMs) return this.judge(presented, hit, now);
    return KEY_NOT_CACHED;
  }

  /** The caller the key stands for, or undefined when it is refused, looked up in the database (one lookup per key at a time). */
  async verifyByLookup(presented: string): Promise<C | undefined> {
    if (!this.kind.isWellFormed(presented)) return this.outcome(undefined);
    const entry = await this.fetch(hashKeyText(presented));
    return this.judge(presented, entry, Date.now());
  }

  /** The caller of a looked-up key; a refusal is remembered for as long as the entry it was read from. */
  private judge(presented: string, entry: CacheEntry<R>, now: number): C | undefined {
    const caller = this.callerOf(entry.record, now);
    if (!caller) setNewest(this.refused, presented, entry.fetchedAt, MAX_ENTRIES);
    return this.outcome(caller);
  }

  private outcome(caller: C | undefined): C | undefined {
    if (caller) this.accepted++;
    else this.rejected++;
    return caller;
  }

  private callerOf(record: R | undefined, now: number): C | undefined {
    if (!record || record.revokedAt || (record.expiresAt && record.expiresAt.getTime() <= now)) return undefined;
    this.uses.set(record.keyId, now);
    return this.kind.callerOf(record);
  }

  private fetch(id: string): Promise<CacheEntry<R>> {
    let pending = this.inflight.get(id);
    if (!pending) {
      const fetchedAt = Date.now();
      this.lookups++;
      pending = this.kind.find(this.sql, Buffer.from(id, 'base64'))
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
    await this.kind.recordUse(this.sql, batch);
  }
}

/** Team keys (`x-service-api-key`): the caller is a team. */
export class KeyVerifier extends CachedKeyVerifier<KeyRecord, Caller> {
  constructor(sql: Sql, ttlMs: number) {
    super(sql, ttlMs, TEAM_KEYS);
  }
}

/** Management keys (`x-management-key`): the caller is the organisation; revoked keys are refused within `ttlMs` likewise. */
export class ManagementKeyVerifier extends CachedKeyVerifier<ManagementKeyRecord, ManagementCaller> {
  constructor(sql: Sql, ttlMs: number) {
    super(sql, ttlMs, MANAGEMENT_KEYS);
  }
}

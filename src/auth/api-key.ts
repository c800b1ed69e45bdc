import { hash, randomBytes } from 'node:crypto';

/** Team keys look like `hds_` + 43 base64url characters (32 random bytes). */
const PREFIX = 'hds_';
const KEY_PATTERN = /^hds_[A-Za-z0-9_-]{43}$/;
/**
 * Management keys (contract section 11) have a prefix of their own: neither
 * kind of key is ever well formed as the other, so each is refused on the
 * other's routes before any lookup.
 */
export const MANAGEMENT_PREFIX = 'hdsm_';
const MANAGEMENT_KEY_PATTERN = /^hdsm_[A-Za-z0-9_-]{43}$/;
/** Characters of the random part shown in listings beside the prefix. */
const SHOWN = 6;

export interface NewKey {
  key: string;
  hash: Buffer;
  displayPrefix: string;
}

/** A new team key, or with MANAGEMENT_PREFIX a new management key. */
export function generateKey(prefix: typeof PREFIX | typeof MANAGEMENT_PREFIX = PREFIX): NewKey {
  const key = prefix + randomBytes(32).toString('base64url');
  return { key, hash: hashKey(key), displayPrefix: key.slice(0, prefix.length + SHOWN) };
}

/** A key that can't be one of ours is refused without a database lookup. */
export function isWellFormedKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

export function isWellFormedManagementKey(value: string): boolean {
  return MANAGEMENT_KEY_PATTERN.test(value);
}

/**
 * SHA-256 is enough here (no slow hash): the secret is 256 random bits, so
 * there is nothing to brute-force, and the lookup stays one indexed equality.
 * Decision: docs/decisions/api-key-hashing-and-cache.md
 */
export function hashKey(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

/**
 * The same hash as base64 text, for in-memory maps. One-shot crypto.hash, not
 * createHash(): no Hash object per request (about a fifth of the time per key).
 */
export function hashKeyText(key: string): string {
  return hash('sha256', key, 'base64');
}

export function displayPrefix(key: string): string {
  return key.slice(0, (key.startsWith(MANAGEMENT_PREFIX) ? MANAGEMENT_PREFIX : PREFIX).length + SHOWN);
}

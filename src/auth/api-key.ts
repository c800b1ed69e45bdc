import { hash, randomBytes } from 'node:crypto';

/** Keys look like `hds_` + 43 base64url characters (32 random bytes). */
const PREFIX = 'hds_';
const KEY_PATTERN = /^hds_[A-Za-z0-9_-]{43}$/;

export interface NewKey {
  key: string;
  hash: Buffer;
  displayPrefix: string;
}

export function generateKey(): NewKey {
  const key = PREFIX + randomBytes(32).toString('base64url');
  return { key, hash: hashKey(key), displayPrefix: displayPrefix(key) };
}

/** A key that can't be one of ours is refused without a database lookup. */
export function isWellFormedKey(value: string): boolean {
  return KEY_PATTERN.test(value);
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
  return key.slice(0, PREFIX.length + 6);
}

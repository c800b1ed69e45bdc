import { randomUUID } from 'node:crypto';
import type { Sql } from '../db/client.js';
import { generateKey } from './api-key.js';
import { insertKey } from './key-store.js';

export interface IssuedKey {
  keyId: string;
  /** The secret: shown once, never stored. */
  key: string;
  displayPrefix: string;
  expiresAt: Date | null;
}

export async function issueKey(sql: Sql, teamId: string, name: string, expiresAt: Date | null = null): Promise<IssuedKey> {
  const { key, hash, displayPrefix } = generateKey();
  const keyId = randomUUID();
  await insertKey(sql, { keyId, teamId, name, displayPrefix, hash, expiresAt });
  return { keyId, key, displayPrefix, expiresAt };
}

import { randomUUID } from 'node:crypto';
import type { Sql } from '../db/client.js';
import { isForeignKeyViolation } from '../db/errors.js';
import { generateKey, MANAGEMENT_PREFIX } from './api-key.js';
import { insertKey, insertManagementKey } from './key-store.js';

export interface IssuedKey {
  keyId: string;
  /** The secret: shown once, never stored. */
  key: string;
  displayPrefix: string;
  expiresAt: Date | null;
  /** When it was stored, as the API writes date-times. */
  createdAt: string;
}

/** issueKey() for a team that does not exist (or was deleted meanwhile). */
export class UnknownTeamError extends Error {
  constructor(readonly teamId: string) {
    super(`no team ${teamId}`);
  }
}

/**
 * The one way a team key is issued: by the admin CLI (`hds keys create`,
 * `rotate`), the demo seed, and the Management API (src/management/).
 */
export async function issueKey(sql: Sql, teamId: string, name: string, expiresAt: Date | null = null): Promise<IssuedKey> {
  const { key, hash, displayPrefix } = generateKey();
  const keyId = randomUUID();
  try {
    const createdAt = await insertKey(sql, { keyId, teamId, name, displayPrefix, hash, expiresAt });
    return { keyId, key, displayPrefix, expiresAt, createdAt };
  } catch (err) {
    if (isForeignKeyViolation(err)) throw new UnknownTeamError(teamId);
    throw err;
  }
}

export interface IssuedManagementKey {
  keyId: string;
  /** The secret: shown once, never stored. */
  key: string;
  displayPrefix: string;
}

/** The one way a management key is issued: the admin CLI (`hds management-keys create`) and the demo seed. */
export async function issueManagementKey(sql: Sql, label: string): Promise<IssuedManagementKey> {
  const { key, hash, displayPrefix } = generateKey(MANAGEMENT_PREFIX);
  const keyId = randomUUID();
  await insertManagementKey(sql, { keyId, label, displayPrefix, hash });
  return { keyId, key, displayPrefix };
}

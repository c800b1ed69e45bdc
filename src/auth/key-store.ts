import type { Sql } from '../db/client.js';

export interface KeyRecord {
  keyId: string;
  teamId: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

export interface KeyListing {
  key_id: string;
  name: string;
  display_prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

export async function findKeyByHash(sql: Sql, hash: Buffer): Promise<KeyRecord | undefined> {
  const [row] = await sql<KeyRecord[]>`
    SELECT key_id AS "keyId", team_id AS "teamId", expires_at AS "expiresAt", revoked_at AS "revokedAt"
    FROM api_keys WHERE key_hash = ${hash}`;
  return row;
}

export async function insertKey(
  sql: Sql,
  key: { keyId: string; teamId: string; name: string; displayPrefix: string; hash: Buffer; expiresAt: Date | null },
): Promise<void> {
  await sql`
    INSERT INTO api_keys (key_id, team_id, name, display_prefix, key_hash, expires_at)
    VALUES (${key.keyId}, ${key.teamId}, ${key.name}, ${key.displayPrefix}, ${key.hash}, ${key.expiresAt})`;
}

export async function listKeys(sql: Sql, teamId: string): Promise<KeyListing[]> {
  return sql<KeyListing[]>`
    SELECT key_id, name, display_prefix, created_at, last_used_at, expires_at, revoked_at
    FROM api_keys WHERE team_id = ${teamId} ORDER BY created_at, key_id`;
}

/** Returns false when no such key exists. Revoking twice keeps the first time. */
export async function revokeKey(sql: Sql, keyId: string): Promise<boolean> {
  const rows = await sql`
    UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE key_id = ${keyId} RETURNING key_id`;
  return rows.length === 1;
}

/**
 * Expires every other unrevoked key of the team at `at` (unless it already
 * expires sooner): the old keys keep working through a rotation's grace period.
 */
export async function expireOtherKeys(sql: Sql, teamId: string, exceptKeyId: string, at: Date): Promise<number> {
  const rows = await sql`
    UPDATE api_keys SET expires_at = LEAST(COALESCE(expires_at, ${at}), ${at})
    WHERE team_id = ${teamId} AND key_id <> ${exceptKeyId} AND revoked_at IS NULL
    RETURNING key_id`;
  return rows.length;
}

/** Writes last-used times collected in memory, one statement per flush instead of one per request. */
export async function recordKeyUse(sql: Sql, uses: Map<string, Date>): Promise<void> {
  if (uses.size === 0) return;
  const ids = [...uses.keys()];
  const times = ids.map((id) => uses.get(id)!.toISOString());
  await sql`
    UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
    FROM unnest(${ids}::uuid[], ${times}::timestamptz[]) AS u(key_id, at)
    WHERE k.key_id = u.key_id`;
}

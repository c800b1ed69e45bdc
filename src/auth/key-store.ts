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

/** Inserts a team key; answers its creation time as the API writes date-times (ISO 8601, `+00:00`). */
export async function insertKey(
  sql: Sql,
  key: { keyId: string; teamId: string; name: string; displayPrefix: string; hash: Buffer; expiresAt: Date | null },
): Promise<string> {
  const [row] = await sql<{ created_at: string }[]>`
    INSERT INTO api_keys (key_id, team_id, name, display_prefix, key_hash, expires_at)
    VALUES (${key.keyId}, ${key.teamId}, ${key.name}, ${key.displayPrefix}, ${key.hash}, ${key.expiresAt})
    RETURNING to_json(created_at) #>> '{}' AS created_at`;
  return row!.created_at;
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

/** Where a page of a keyset-paged list starts: after this row. */
export interface PageKey {
  createdAt: string;
  id: string;
}

/** A team key as the Management API lists it: never the key, its visible prefix only. */
export interface TeamKeyListing {
  key_id: string;
  name: string;
  display_prefix: string;
  team_id: string;
  created_at: string;
}

/**
 * The keys that work now (not revoked, not expired) of one team, or of every
 * team when `teamId` is undefined, in (created_at, key_id) order after
 * `after`: at most `limit` rows read through an index in that order, so a
 * page deep in the list costs what the first one does.
 */
export async function listActiveKeysPage(
  sql: Sql, teamId: string | undefined, after: PageKey | undefined, limit: number,
): Promise<TeamKeyListing[]> {
  return sql<TeamKeyListing[]>`
    SELECT key_id, name, display_prefix, team_id, to_json(created_at) #>> '{}' AS created_at
    FROM api_keys
    WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
      ${teamId === undefined ? sql`` : sql`AND team_id = ${teamId}`}
      -- The time is bound as text: the driver would make it a JS Date, which has no microseconds.
      ${after === undefined ? sql`` : sql`AND (created_at, key_id) > (${after.createdAt}::text::timestamptz, ${after.id}::uuid)`}
    ORDER BY created_at, key_id
    LIMIT ${limit}`;
}

/** Revokes those of `keyIds` that are not revoked yet, in one statement; answers the ids it revoked. */
export async function revokeKeys(sql: Sql, keyIds: string[]): Promise<string[]> {
  const rows = await sql<{ key_id: string }[]>`
    UPDATE api_keys SET revoked_at = now()
    WHERE key_id = ANY(${keyIds}::uuid[]) AND revoked_at IS NULL
    RETURNING key_id`;
  return rows.map((r) => r.key_id);
}

/** A management key's record, as the key verifier reads it (management keys never expire: revoke them). */
export interface ManagementKeyRecord {
  keyId: string;
  orgId: string;
  expiresAt: null;
  revokedAt: Date | null;
}

export interface ManagementKeyListing {
  key_id: string;
  label: string;
  display_prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export async function findManagementKeyByHash(sql: Sql, hash: Buffer): Promise<ManagementKeyRecord | undefined> {
  const [row] = await sql<ManagementKeyRecord[]>`
    SELECT key_id AS "keyId", org_id AS "orgId", NULL AS "expiresAt", revoked_at AS "revokedAt"
    FROM management_keys WHERE key_hash = ${hash}`;
  return row;
}

/** Inserts a management key of the deployment's organisation. */
export async function insertManagementKey(sql: Sql, key: { keyId: string; label: string; displayPrefix: string; hash: Buffer }): Promise<void> {
  await sql`
    INSERT INTO management_keys (key_id, org_id, label, display_prefix, key_hash)
    SELECT ${key.keyId}, org_id, ${key.label}, ${key.displayPrefix}, ${key.hash} FROM org`;
}

export async function listManagementKeys(sql: Sql): Promise<ManagementKeyListing[]> {
  return sql<ManagementKeyListing[]>`
    SELECT key_id, label, display_prefix, created_at, last_used_at, revoked_at
    FROM management_keys ORDER BY created_at, key_id`;
}

/** Returns false when no such key exists. Revoking twice keeps the first time. */
export async function revokeManagementKey(sql: Sql, keyId: string): Promise<boolean> {
  const rows = await sql`
    UPDATE management_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE key_id = ${keyId} RETURNING key_id`;
  return rows.length === 1;
}

/** Writes management keys' last-used times collected in memory, as recordKeyUse does for team keys. */
export async function recordManagementKeyUse(sql: Sql, uses: Map<string, Date>): Promise<void> {
  if (uses.size === 0) return;
  const ids = [...uses.keys()];
  const times = ids.map((id) => uses.get(id)!.toISOString());
  await sql`
    UPDATE management_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
    FROM unnest(${ids}::uuid[], ${times}::timestamptz[]) AS u(key_id, at)
    WHERE k.key_id = u.key_id`;
}

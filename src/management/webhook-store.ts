import type { Queryable, Sql } from '../db/client.js';
import type { PageKey } from './cursor.js';

/**
 * The webhook endpoints' SQL (migrations/009). Every statement names the
 * team as well as the endpoint: another team's endpoint is not found, exactly
 * like a missing one.
 */

/** The contract's Webhook object; date-times as the API writes them. */
export interface Webhook {
  id: string;
  url: string;
  description: string;
  rate_limit: number | null;
  disabled: boolean;
  filter_types: string[] | null;
  created_at: string;
  updated_at: string;
}

/** The fields a create or a PATCH may set (undefined: not given). */
export interface WebhookFields {
  url?: string;
  description?: string;
  rate_limit?: number | null;
  disabled?: boolean;
  filter_types?: string[] | null;
}

const WEBHOOK = (sql: Queryable) => sql`
  endpoint_id AS id, url, description, rate_limit, disabled, filter_types,
  to_json(created_at) #>> '{}' AS created_at, to_json(updated_at) #>> '{}' AS updated_at`;

/** Inserts an endpoint of the team with its first signing secret; undefined when the team does not exist. */
export async function insertWebhook(sql: Sql, teamId: string, id: string, fields: Required<Pick<WebhookFields, 'url'>> & WebhookFields, secret: string): Promise<Webhook | undefined> {
  return sql.begin(async (tx) => {
    const [row] = await tx<Webhook[]>`
      INSERT INTO webhook_endpoints (endpoint_id, team_id, url, description, rate_limit, disabled, filter_types)
      SELECT ${id}, team_id, ${fields.url}, ${fields.description ?? ''}, ${fields.rate_limit ?? null},
             ${fields.disabled ?? false}, ${fields.filter_types ?? null}::text[]
      FROM teams WHERE team_id = ${teamId}
      RETURNING ${WEBHOOK(tx)}`;
    if (!row) return undefined;
    await tx`INSERT INTO webhook_secrets (endpoint_id, secret) VALUES (${id}, ${secret})`;
    return row;
  });
}

export async function findWebhook(sql: Sql, teamId: string, id: string): Promise<Webhook | undefined> {
  const [row] = await sql<Webhook[]>`SELECT ${WEBHOOK(sql)} FROM webhook_endpoints WHERE team_id = ${teamId} AND endpoint_id = ${id}`;
  return row;
}

/** The team's endpoints in (created_at, endpoint_id) order after `after`, at most `limit`, read by the index in that order. */
export async function listWebhooksPage(sql: Sql, teamId: string, after: PageKey | undefined, limit: number): Promise<Webhook[]> {
  return sql<Webhook[]>`
    SELECT ${WEBHOOK(sql)} FROM webhook_endpoints
    WHERE team_id = ${teamId}
      -- The time is bound as text: the driver would make it a JS Date, which has no microseconds.
      ${after === undefined ? sql`` : sql`AND (created_at, endpoint_id) > (${after.createdOn}::text::timestamptz, ${after.id}::uuid)`}
    ORDER BY created_at, endpoint_id
    LIMIT ${limit}`;
}

/** Sets the fields given and updated_at; undefined when the team has no such endpoint. */
export async function updateWebhook(sql: Sql, teamId: string, id: string, fields: WebhookFields): Promise<Webhook | undefined> {
  const keep = <T>(value: T | undefined, column: string) => (value === undefined ? sql(column) : sql`${value as never}`);
  const [row] = await sql<Webhook[]>`
    UPDATE webhook_endpoints SET
      url = ${keep(fields.url, 'url')},
      description = ${keep(fields.description, 'description')},
      rate_limit = ${keep(fields.rate_limit, 'rate_limit')},
      disabled = ${keep(fields.disabled, 'disabled')},
      -- Enabled again: its streak of failures starts anew, or its first failed attempt would disable it at once.
      failing_since = CASE WHEN disabled AND NOT ${keep(fields.disabled, 'disabled')} THEN NULL ELSE failing_since END,
      filter_types = ${fields.filter_types === undefined ? sql`filter_types` : sql`${fields.filter_types}::text[]`},
      updated_at = now()
    WHERE team_id = ${teamId} AND endpoint_id = ${id}
    RETURNING ${WEBHOOK(sql)}`;
  return row;
}

/** Deletes the endpoint and its secrets; false when the team has no such endpoint. */
export async function deleteWebhook(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const rows = await sql`DELETE FROM webhook_endpoints WHERE team_id = ${teamId} AND endpoint_id = ${id} RETURNING 1`;
  return rows.length === 1;
}

/** The endpoint's custom headers, values included (callers hide the sensitive ones); undefined when there is no such endpoint. */
export async function findWebhookHeaders(sql: Sql, teamId: string, id: string): Promise<Record<string, string> | undefined> {
  const [row] = await sql<{ headers: Record<string, string> }[]>`
    SELECT headers FROM webhook_endpoints WHERE team_id = ${teamId} AND endpoint_id = ${id}`;
  return row?.headers;
}

/** Replaces the endpoint's custom headers; false when there is no such endpoint. */
export async function replaceWebhookHeaders(sql: Sql, teamId: string, id: string, headers: Record<string, string>): Promise<boolean> {
  const rows = await sql`
    UPDATE webhook_endpoints SET headers = ${sql.json(headers)}, updated_at = now()
    WHERE team_id = ${teamId} AND endpoint_id = ${id} RETURNING 1`;
  return rows.length === 1;
}

/** The endpoint's current signing secret; undefined when there is no such endpoint. */
export async function findCurrentSecret(sql: Sql, teamId: string, id: string): Promise<string | undefined> {
  const [row] = await sql<{ secret: string }[]>`
    SELECT s.secret FROM webhook_endpoints e JOIN webhook_secrets s USING (endpoint_id)
    WHERE e.team_id = ${teamId} AND e.endpoint_id = ${id} AND s.expires_at IS NULL`;
  return row?.secret;
}

/**
 * Every secret that signs the endpoint's deliveries now, the current one
 * first: during a rotation's overlap also the ones it replaced (section 10:
 * one signature per valid secret). The delivery's claim reads them by the
 * same rule in its own statement (src/events/claims.ts).
 */
export async function signingSecrets(sql: Sql, teamId: string, id: string): Promise<string[]> {
  const rows = await sql<{ secret: string }[]>`
    SELECT s.secret FROM webhook_endpoints e JOIN webhook_secrets s USING (endpoint_id)
    WHERE e.team_id = ${teamId} AND e.endpoint_id = ${id} AND (s.expires_at IS NULL OR s.expires_at > now())
    ORDER BY s.expires_at DESC NULLS FIRST, s.created_at DESC`;
  return rows.map((r) => r.secret);
}

/**
 * Makes `secret` the endpoint's current one; the one it replaces keeps
 * signing for `overlapMs` (24 hours: section 11). Secrets past their overlap
 * are deleted. False when the team has no such endpoint.
 */
export async function rotateSecret(sql: Sql, teamId: string, id: string, secret: string, overlapMs: number): Promise<boolean> {
  return sql.begin(async (tx) => {
    // The endpoint row is locked: two rotations of one endpoint run one after the other.
    const found = await tx`SELECT 1 FROM webhook_endpoints WHERE team_id = ${teamId} AND endpoint_id = ${id} FOR UPDATE`;
    if (found.length === 0) return false;
    await tx`DELETE FROM webhook_secrets WHERE endpoint_id = ${id} AND expires_at <= now()`;
    await tx`
      UPDATE webhook_secrets SET expires_at = now() + make_interval(secs => ${overlapMs / 1000})
      WHERE endpoint_id = ${id} AND expires_at IS NULL`;
    await tx`INSERT INTO webhook_secrets (endpoint_id, secret) VALUES (${id}, ${secret})`;
    return true;
  });
}

import type { Sql } from '../db/client.js';
import type { PageKey } from './cursor.js';

/**
 * An endpoint's messages (migrations/011): one per event sent to it, with
 * its delivery's state. Read by the messages route, sent again by recover;
 * src/events/ delivers them.
 */

/** The channel the dispatchers LISTEN on; the payload names endpoints (comma-separated), or is empty for all. */
export const MESSAGES_CHANNEL = 'hds_webhook_messages';

export const MESSAGE_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

/** The `webhook-id` of an event: `msg_` and its id, the same for every endpoint and every attempt. */
export function messageId(eventId: string): string {
  return `msg_${eventId.replaceAll('-', '')}`;
}

/** A message as the API shows it (contract section 11), with its event's id for the page key. */
export interface Message {
  id: string;
  event_type: string;
  created_at: string;
  status: MessageStatus;
  attempts: number;
  last_attempt_at: string | null;
  last_status_code: number | null;
  event_id: string;
}

/**
 * The endpoint's messages in (created_at, event_id) order after `after`, at
 * most `limit`, of one status or all, read by an index in that order (the
 * messages not delivered have one of their own).
 */
export async function listMessagesPage(sql: Sql, endpointId: string, status: MessageStatus | undefined, after: PageKey | undefined, limit: number): Promise<Message[]> {
  const rows = await sql<Message[]>`
    SELECT m.event_id, e.event_type, to_json(m.created_at) #>> '{}' AS created_at, m.status, m.attempts,
      to_json(m.last_attempt_at) #>> '{}' AS last_attempt_at, m.last_status_code
    FROM webhook_messages m JOIN events e USING (event_id)
    WHERE m.endpoint_id = ${endpointId}
      ${status === undefined ? sql`` : status === 'delivered' ? sql`AND m.status = 'delivered'` : sql`AND m.status <> 'delivered' AND m.status = ${status}`}
      -- The time is bound as text: the driver would make it a JS Date, which has no microseconds.
      ${after === undefined ? sql`` : sql`AND (m.created_at, m.event_id) > (${after.createdOn}::text::timestamptz, ${after.id}::uuid)`}
    ORDER BY m.created_at, m.event_id
    LIMIT ${limit}`;
  return rows.map((r) => ({ ...r, id: messageId(r.event_id) }));
}

/**
 * Every `failed` message of the endpoint created at `since` or later is
 * pending again, due now, its schedule started anew; the dispatchers are
 * woken. Returns how many.
 */
export async function recoverMessages(sql: Sql, endpointId: string, since: string): Promise<number> {
  const [row] = await sql<{ recovered: number }[]>`
    WITH recovered AS (
      UPDATE webhook_messages SET status = 'pending', attempts = 0, next_attempt_at = now()
      WHERE endpoint_id = ${endpointId} AND status <> 'delivered' AND status = 'failed' AND created_at >= ${since}::text::timestamptz
      RETURNING 1
    )
    SELECT n AS recovered, CASE WHEN n > 0 THEN pg_notify(${MESSAGES_CHANNEL}, ${endpointId}) END AS woken
    FROM (SELECT count(*)::int AS n FROM recovered) c`;
  return row!.recovered;
}

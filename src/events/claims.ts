import type { Sql } from '../db/client.js';

/**
 * The delivery's SQL (migrations/011). A message is claimed for an attempt
 * by moving its next_attempt_at past a lease, in a statement that skips
 * rows another dispatcher is claiming (FOR UPDATE SKIP LOCKED): with several
 * instances each attempt is made by one of them. Its outcome is written only
 * while the message is still at the attempt claimed (the fence): a
 * dispatcher that lost its lease cannot overwrite a later attempt's. A
 * dispatcher that dies mid-attempt leaves the message due again when the
 * lease ends, with the same webhook-id.
 */

/** An endpoint as a delivery needs it. */
export interface ClaimedEndpoint {
  url: string;
  headers: Record<string, string>;
  /** The secrets that sign now, the current one first. */
  secrets: string[];
}

export interface ClaimedMessage {
  event_id: string;
  /** The attempt this claim is (1 for the first): the fence of its outcome. */
  attempts: number;
  body: string;
}

export interface Claim {
  endpoint: ClaimedEndpoint;
  messages: ClaimedMessage[];
  /** Nothing claimed: in how many ms the endpoint's earliest pending message is due (null: none pending). */
  nextDueMs: number | null;
  /** The endpoint's rate_limit left no room in this second: in how many ms the next second starts. */
  rateLimitedForMs: number | null;
}

/**
 * Claims up to `room` of the endpoint's due messages (the earliest due
 * first) and what sending them needs, within the endpoint's rate_limit:
 * the messages claimed in the current second are counted on its row, which
 * is locked for the statement, so that all instances share the limit.
 * Undefined when the endpoint is gone or disabled.
 */
export async function claimMessages(sql: Sql, endpointId: string, room: number, leaseMs: number): Promise<Claim | undefined> {
  const rows = await sql<(ClaimedEndpoint & { room: number; next_due_ms: number | null; next_second_ms: number; event_id: string | null; attempts: number | null; body: string | null })[]>`
    WITH endpoint AS (
      SELECT e.endpoint_id, e.url, e.headers,
        CASE WHEN e.rate_limit IS NULL THEN ${room}::int
             ELSE least(${room}::int, e.rate_limit - CASE WHEN e.rate_window = date_trunc('second', now()) THEN e.rate_used ELSE 0 END) END AS room
      FROM webhook_endpoints e WHERE e.endpoint_id = ${endpointId} AND NOT e.disabled
      FOR NO KEY UPDATE
    ), due AS (
      SELECT m.event_id FROM webhook_messages m
      WHERE m.endpoint_id = ${endpointId} AND m.status = 'pending' AND m.next_attempt_at <= now()
      ORDER BY m.next_attempt_at
      LIMIT greatest((SELECT room FROM endpoint), 0)
      FOR UPDATE SKIP LOCKED
    ), claimed AS (
      -- By primary key from an array, and each body by primary key below: the planner cannot see
      -- the limit above (a subquery), and joins planned for a tenth of the table would read all of it.
      UPDATE webhook_messages m SET attempts = m.attempts + 1, next_attempt_at = now() + ${leaseMs} * interval '1 millisecond'
      WHERE m.endpoint_id = ${endpointId} AND m.event_id = ANY (ARRAY(SELECT event_id FROM due))
      RETURNING m.event_id, m.attempts
    ), counted AS (
      UPDATE webhook_endpoints w SET rate_window = date_trunc('second', now()),
        rate_used = CASE WHEN w.rate_window = date_trunc('second', now()) THEN w.rate_used ELSE 0 END + (SELECT count(*)::int FROM claimed)
      WHERE w.endpoint_id = ${endpointId} AND w.rate_limit IS NOT NULL AND EXISTS (SELECT 1 FROM claimed)
    )
    SELECT e.url, e.headers, e.room,
      ARRAY(SELECT s.secret FROM webhook_secrets s WHERE s.endpoint_id = e.endpoint_id AND (s.expires_at IS NULL OR s.expires_at > now())
            ORDER BY s.expires_at DESC NULLS FIRST, s.created_at DESC) AS secrets,
      CASE WHEN NOT EXISTS (SELECT 1 FROM claimed) THEN (
        SELECT ceil(extract(epoch FROM min(p.next_attempt_at) - now()) * 1000)::int FROM webhook_messages p
        WHERE p.endpoint_id = e.endpoint_id AND p.status = 'pending') END AS next_due_ms,
      (1000 - floor(extract(epoch FROM now() - date_trunc('second', now())) * 1000))::int AS next_second_ms,
      c.event_id, c.attempts, (SELECT v.body FROM events v WHERE v.event_id = c.event_id) AS body
    FROM endpoint e
    LEFT JOIN claimed c ON true`;
  const [first] = rows;
  if (!first) return undefined;
  const messages = rows.filter((r) => r.event_id !== null).map((r) => ({ event_id: r.event_id!, attempts: r.attempts!, body: r.body! }));
  return {
    endpoint: { url: first.url, headers: first.headers, secrets: first.secrets },
    messages,
    nextDueMs: first.next_due_ms,
    rateLimitedForMs: first.room <= messages.length && first.room < room ? first.next_second_ms : null,
  };
}

/** The outcome of one attempt, for the message claimed at `attempts`. */
export interface Outcome {
  event_id: string;
  attempts: number;
  /** The answer's status; null when none came. */
  status: number | null;
  delivered: boolean;
  /** Failed: in how many ms to try again; null: no retry is left (the message is `failed`). */
  retryInMs: number | null;
  /** When the attempt was made (ISO). */
  at: string;
}

/** What recording outcomes changed about the endpoint. */
export interface EndpointChange {
  /** Disabled by this batch: a 410, or every attempt failed for WEBHOOK_DISABLE_AFTER. */
  disabled: 'gone' | 'failing' | null;
}

/**
 * Writes the outcomes of attempts at one endpoint, each only if its message
 * is still at the attempt claimed (only its claimer writes that attempt's
 * outcome, so the message is pending until then); then the endpoint's failure streak: a
 * delivery ends it; a failure starts it, and disables the endpoint once it
 * is `disableAfterMs` old; a 410 disables it at once.
 */
export async function recordOutcomes(sql: Sql, endpointId: string, outcomes: Outcome[], disableAfterMs: number): Promise<EndpointChange> {
  const anyDelivered = outcomes.some((o) => o.delivered);
  const gone = outcomes.some((o) => o.status === 410);
  const [row] = await sql<{ was: boolean | null; disabled: boolean | null }[]>`
    WITH outcome AS (
      SELECT * FROM unnest(${outcomes.map((o) => o.event_id)}::uuid[], ${outcomes.map((o) => o.attempts)}::int[],
        ${outcomes.map((o) => o.status)}::int[], ${outcomes.map((o) => (o.delivered ? 't' : 'f'))}::text[]::boolean[],
        ${outcomes.map((o) => o.retryInMs)}::int[], ${outcomes.map((o) => o.at)}::text[])
        AS o(event_id, attempts, status, delivered, retry_in_ms, at)
    ), written AS (
      UPDATE webhook_messages m SET
        status = CASE WHEN o.delivered THEN 'delivered' WHEN o.retry_in_ms IS NULL OR o.status = 410 THEN 'failed' ELSE 'pending' END,
        next_attempt_at = CASE WHEN o.delivered OR o.retry_in_ms IS NULL THEN m.next_attempt_at ELSE now() + o.retry_in_ms * interval '1 millisecond' END,
        last_attempt_at = o.at::timestamptz, last_status_code = o.status
      FROM outcome o
      -- By primary key and the fence alone: a status test would let the planner, whose statistics
      -- may say nothing is pending, read the endpoint's whole backlog through the claims' index.
      WHERE m.endpoint_id = ${endpointId} AND m.event_id = o.event_id AND m.attempts = o.attempts
    ), before AS (
      SELECT disabled FROM webhook_endpoints WHERE endpoint_id = ${endpointId}
    ), streak AS (
      UPDATE webhook_endpoints w SET
        failing_since = CASE WHEN ${anyDelivered} THEN NULL ELSE coalesce(w.failing_since, now()) END,
        disabled = w.disabled OR ${gone}
          OR (NOT ${anyDelivered} AND coalesce(w.failing_since <= now() - ${disableAfterMs} * interval '1 millisecond', false))
      WHERE w.endpoint_id = ${endpointId} AND (${gone} OR NOT ${anyDelivered} OR w.failing_since IS NOT NULL)
      RETURNING w.disabled
    )
    SELECT b.disabled AS was, s.disabled FROM before b LEFT JOIN streak s ON true`;
  const disabledNow = !!row && row.was === false && row.disabled === true;
  return { disabled: disabledNow ? (gone ? 'gone' : 'failing') : null };
}

/**
 * Every enabled endpoint with pending messages, and in how many ms its
 * earliest is due (≤ 0: now; a lease's end counts: a claim a dead
 * dispatcher left is taken again then). In the database's clock.
 */
export async function pendingEndpoints(sql: Sql): Promise<{ endpoint_id: string; due_in_ms: number }[]> {
  return sql<{ endpoint_id: string; due_in_ms: number }[]>`
    SELECT e.endpoint_id, ceil(extract(epoch FROM d.due - now()) * 1000)::int AS due_in_ms
    FROM webhook_endpoints e CROSS JOIN LATERAL (
      SELECT m.next_attempt_at AS due FROM webhook_messages m
      WHERE m.endpoint_id = e.endpoint_id AND m.status = 'pending'
      ORDER BY m.next_attempt_at LIMIT 1
    ) d
    WHERE NOT e.disabled`;
}

/**
 * Messages not delivered by state, for /metrics: pending (to be attempted),
 * held (pending at a disabled endpoint: attempted only once it is enabled
 * again) and failed; and the age in seconds of the oldest pending one (0
 * when none). Held messages are kept out of that age: one disabled endpoint
 * would otherwise make it grow for ever, and an alert on it mean nothing.
 */
export async function backlog(sql: Sql): Promise<{ pending: number; held: number; failed: number; oldestPendingSeconds: number }> {
  const [row] = await sql<{ pending: number; held: number; failed: number; oldest: number | null }[]>`
    SELECT count(*) FILTER (WHERE m.status = 'pending' AND NOT e.disabled)::int AS pending,
      count(*) FILTER (WHERE m.status = 'pending' AND e.disabled)::int AS held,
      count(*) FILTER (WHERE m.status = 'failed')::int AS failed,
      extract(epoch FROM now() - min(m.created_at) FILTER (WHERE m.status = 'pending' AND NOT e.disabled))::float8 AS oldest
    FROM webhook_messages m JOIN webhook_endpoints e USING (endpoint_id)
    WHERE m.status <> 'delivered'`;
  return { pending: row!.pending, held: row!.held, failed: row!.failed, oldestPendingSeconds: row!.oldest ?? 0 };
}

const PRUNE_BATCH = 1000;

/**
 * Deletes events older than `retentionMs` with their messages, in batches
 * of short transactions; an event with a message still pending is kept
 * until it is delivered or failed. Returns how many.
 */
export async function pruneEvents(sql: Sql, retentionMs: number): Promise<number> {
  let pruned = 0;
  for (;;) {
    const rows = await sql`
      DELETE FROM events WHERE event_id IN (
        SELECT v.event_id FROM events v
        WHERE v.created_at < now() - ${retentionMs} * interval '1 millisecond'
          AND NOT EXISTS (SELECT 1 FROM webhook_messages m WHERE m.event_id = v.event_id AND m.status = 'pending')
        ORDER BY v.created_at LIMIT ${PRUNE_BATCH}
        FOR UPDATE SKIP LOCKED)
      RETURNING 1`;
    pruned += rows.length;
    if (rows.length < PRUNE_BATCH) return pruned;
  }
}

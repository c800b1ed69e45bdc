import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../db/client.js';
import { userDocument } from '../user-document/document.js';
import { isUniqueViolation } from '../db/errors.js';
import { KeyedBatcher } from '../db/keyed-batcher.js';
import { onePerPool } from '../db/pending-batch.js';
import { retryingDeadlocks } from './retry.js';
import { renumberTeam, teamChange } from '../writes/team-state.js';
import { columnList, USER_COLUMNS } from '../writes/user-columns.js';

export interface NewUser {
  client_user_id: string;
  fallback_time_zone?: string;
  fallback_birth_date?: string;
  ingestion_start?: string;
  ingestion_end?: string;
}

export type CreateResult =
  | { created: true; user_id: string; doc: string }
  | { created: false; existing: { user_id: string; created_on: string } };

/**
 * Stands for the creation time in the document built here: PostgreSQL puts
 * its clock's time in its place (the time is read once the team is locked,
 * so that times follow positions). A raw control character never appears in
 * a document otherwise: free text is JSON-escaped, and the other values are
 * ids, dates and zone names.
 */
const NOW = '\u0001';

/** A create's outcome in its batch: its document, or nothing written (`in_order` false: the batch would not sort last; null: no such team). */
type Attempt = { doc: string | null; in_order: boolean | null };

interface Asked { userId: string; input: NewUser; template: string }

/**
 * Concurrent creates of a team in this process go to PostgreSQL together
 * (src/db/keyed-batcher.ts): one statement and one commit for all that
 * arrived while the team's previous batch was being written. Creates of a
 * team are serialised by its row lock until their commit is on disk, so
 * one at a time each waited for the flushes of all before it: the p99 of
 * the bench's create scenario (8 connections, one team) followed the
 * disk's flush time and missed 20 ms (figures: `git show a7fc7f5:CHANGELOG.md`). The bound
 * keeps one statement's parameters small. Guarded by
 * test/create-batches.test.ts.
 */
const CREATES_PER_BATCH = 64;
const batchers = new WeakMap<Sql, KeyedBatcher<Asked, Attempt>>();

const createsOf = (sql: Sql) =>
  onePerPool(batchers, sql, () => new KeyedBatcher<Asked, Attempt>((teamId, asked) => insertBatch(sql, teamId, asked), CREATES_PER_BATCH));

/**
 * Creates a user. Creates in one team take positions one batch after the
 * other under the team's row lock; a client_user_id held by a live user of
 * the team (or by an earlier create of the same batch) writes nothing.
 * In the usual case one statement per batch: the batch sorts last (its
 * time is the latest), takes the team's next positions in user_id order,
 * and the team's state follows (team-state.ts).
 */
export async function createUser(sql: Sql, teamId: string, input: NewUser): Promise<CreateResult> {
  const userId = randomUUID();
  const asked = { userId, input, template: documentTemplate(userId, teamId, input) };
  for (let attempt = 1; ; attempt++) {
    const tried = await createsOf(sql).load(teamId, asked);
    // No team row: the team is gone (deleted after the key was checked); trying again cannot help.
    if (tried.in_order === null) throw new Error(`team ${teamId} does not exist`);
    if (tried.doc) return { created: true, user_id: userId, doc: tried.doc };
    if (!tried.in_order) {
      // Only when the clock went back, or an import brought users from the future: inserted, then the team renumbered.
      const doc = await retryingDeadlocks(() => sql.begin(async (tx) => {
        const [forced] = await insertUsers(tx, teamId, [asked], true);
        if (forced?.doc) await renumberTeam(tx, teamId);
        return forced?.doc;
      }));
      if (doc) return { created: true, user_id: userId, doc };
    }
    const [existing] = await sql<{ user_id: string; created_on: string }[]>`
      SELECT user_id, to_json(created_on) #>> '{}' AS created_on
      FROM users WHERE team_id = ${teamId} AND client_user_id = ${input.client_user_id}`;
    if (existing) return { created: false, existing };
    // The holder of the client_user_id was deleted (or renamed) between the insert and this read: try again.
    if (attempt >= 5) throw new Error(`create in team ${teamId} wrote nothing, and no user holds its client_user_id`);
  }
}

/**
 * A batch's statement, run again also when it met a client_user_id that
 * another process's create committed after the statement's snapshot was
 * taken (its check of taken ids reads that snapshot, taken before the
 * team's lock was granted): the unique index refused the batch whole, and
 * the next statement's snapshot sees the holder.
 */
const insertBatch = (sql: Sql, teamId: string, asked: Asked[]) =>
  retryingDeadlocks(() => insertUsers(sql, teamId, asked, false), isUniqueViolation);

function documentTemplate(userId: string, teamId: string, input: NewUser): string {
  return userDocument({
    user_id: userId, team_id: teamId, client_user_id: input.client_user_id, created_on: NOW, connected_sources: [],
    fallback_time_zone: input.fallback_time_zone ? { id: input.fallback_time_zone, source_slug: 'manual', updated_at: NOW } : null,
    fallback_birth_date: input.fallback_birth_date ? { value: input.fallback_birth_date, source_slug: 'manual', updated_at: NOW } : null,
    ingestion_start: input.ingestion_start ?? null, ingestion_end: input.ingestion_end ?? null,
  });
}

/**
 * The inserts, with the team locked; one answer per create, in order. All
 * of the batch's users get the same time, read once the lock is held (so
 * that times follow positions), and positions in user_id order, the list's
 * order among equal times. Unless `anyOrder`, nothing is written when the
 * batch would not sort after the team's last user (live or scheduled for
 * deletion): its positions would then be out of order.
 */
function insertUsers(sql: Queryable, teamId: string, asked: Asked[], anyOrder: boolean) {
  // Dates are bound as text and cast by PostgreSQL: the driver would make a date parameter a JS Date, which rolls 30 February over to March.
  const column = (value: (input: NewUser) => string | undefined) => asked.map((a) => value(a.input) ?? null);
  return sql<Attempt[]>`
    WITH team AS (
      SELECT team_id, next_position FROM teams WHERE team_id = ${teamId} FOR UPDATE
    ), now AS (
      -- LATERAL on the locked row: the clock is read after the lock is held.
      SELECT t.team_id, t.next_position, c.at FROM team t CROSS JOIN LATERAL (SELECT clock_timestamp() AS at, t.team_id AS locked) c
    ), asked AS (
      SELECT * FROM unnest(
        ${asked.map((a) => a.userId)}::uuid[], ${column((i) => i.client_user_id)}::text[],
        ${column((i) => i.fallback_time_zone)}::text[], ${column((i) => i.fallback_birth_date)}::text[],
        ${column((i) => i.ingestion_start)}::text[], ${column((i) => i.ingestion_end)}::text[],
        ${asked.map((a) => a.template)}::text[]
      ) WITH ORDINALITY AS a(user_id, client_user_id, tz, bd, ingestion_start, ingestion_end, template, ord)
    ), fresh AS (
      -- The first create of each client_user_id that no live user of the team holds.
      SELECT DISTINCT ON (a.client_user_id) a.* FROM asked a CROSS JOIN now n
      WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.team_id = n.team_id AND u.client_user_id = a.client_user_id)
      ORDER BY a.client_user_id, a.ord
    ), placed AS (
      SELECT f.*, n.team_id, n.at, n.next_position - 1 + row_number() OVER (ORDER BY f.user_id) AS position
      FROM fresh f CROSS JOIN now n
    ), ordered AS (
      SELECT ${anyOrder}::boolean OR NOT EXISTS (
        SELECT 1 FROM (
          (SELECT created_on, user_id FROM users WHERE team_id = n.team_id ORDER BY position DESC LIMIT 1)
          UNION ALL
          (SELECT created_on, user_id FROM deleted_users WHERE team_id = n.team_id ORDER BY position DESC LIMIT 1)
        ) l WHERE (l.created_on, l.user_id) > (n.at, (SELECT user_id FROM fresh ORDER BY user_id LIMIT 1))
      ) AS in_order
      FROM now n
    ), created AS (
      -- The values in the order of USER_COLUMNS, then the position.
      INSERT INTO users (${columnList(sql, USER_COLUMNS)}, position)
      SELECT p.user_id, p.team_id, p.client_user_id, p.at,
        p.tz, CASE WHEN p.tz IS NULL THEN NULL ELSE 'manual' END, CASE WHEN p.tz IS NULL THEN NULL ELSE p.at END,
        p.bd::date, CASE WHEN p.bd IS NULL THEN NULL ELSE 'manual' END, CASE WHEN p.bd IS NULL THEN NULL ELSE p.at END,
        p.ingestion_start::date, p.ingestion_end::date,
        replace(p.template, chr(1), to_json(p.at) #>> '{}'),
        p.position
      FROM placed p WHERE (SELECT in_order FROM ordered)
      RETURNING user_id, client_user_id, doc
    ), created_events AS (
      SELECT 'user.created' AS event_type, user_id, client_user_id, doc AS data FROM created
    ), ${teamChange(sql, teamId, { appended: 'created', events: 'created_events' })}
    SELECT c.doc, (SELECT in_order FROM ordered) AS in_order
    FROM asked a LEFT JOIN created c USING (user_id)
    ORDER BY a.ord`;
}

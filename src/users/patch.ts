import type { FastifySchemaValidationError } from 'fastify';
import type { Sql } from '../db/client.js';
import type { ValidationItem } from '../errors/catalogue.js';
import { isUniqueViolation } from '../db/errors.js';
import { parseUserDocument, userDocument, type UserDocInput } from '../user-document/document.js';
import { findVersionedDocBatched } from './batched-lookups.js';
import { retryingDeadlocks } from './retry.js';
import { teamChange } from '../writes/team-state.js';
import { teamWrite } from '../writes/team-batches.js';
import { parsePgTime } from '../user-document/pg-time.js';
import { notAnObject, toValidationItems } from '../validation/items.js';

/** What PATCH may change; a field sent as null clears it (client_user_id excepted). */
const PATCHABLE = ['client_user_id', 'fallback_time_zone', 'fallback_birth_date', 'ingestion_start', 'ingestion_end'] as const;
type Field = (typeof PATCHABLE)[number];
export type UserPatch = Partial<Record<Field, string | null>>;

export type PatchCheck =
  | { ok: true; patch: UserPatch }
  | { ok: false; nothingToPatch: true }
  | { ok: false; nothingToPatch: false; items: ValidationItem[] };

/**
 * The body's problems in the contract's order (after the user is known to
 * exist): not an object (422), nothing to patch (400; unknown fields are
 * ignored, a field sent as null counts), then every bad value (422).
 * `errors` are the schema validator's for the body, if any.
 */
export function checkPatchBody(body: unknown, errors: FastifySchemaValidationError[] | undefined): PatchCheck {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, nothingToPatch: false, items: [notAnObject(body ?? null)] };
  const fields = body as Record<string, unknown>;
  const present = PATCHABLE.filter((f) => fields[f] !== undefined);
  if (present.length === 0) return { ok: false, nothingToPatch: true };
  const items: ValidationItem[] = [];
  if (fields.client_user_id === null) {
    items.push({ type: 'value_error', loc: ['body'], msg: 'Value error, client_user_id is not a field that can be reset to null.', input: body });
  }
  // The schema's own complaint about a null client_user_id is the item above.
  const schemaErrors = (errors ?? []).filter((e) => !(e.instancePath === '/client_user_id' && fields.client_user_id === null));
  items.push(...toValidationItems('body', schemaErrors));
  const patch: UserPatch = {};
  for (const f of present) patch[f] = fields[f] as string | null;
  if (items.length === 0) {
    const order = ingestionOrder(patch.ingestion_start, patch.ingestion_end);
    if (order) items.push(order);
  }
  return items.length > 0 ? { ok: false, nothingToPatch: false, items } : { ok: true, patch };
}

/**
 * The ingestion bounds' problem, if any: the start after the end. Named at
 * the bound that was sent (`sent`: the end when a PATCH sent only the end),
 * with the value sent: a stored value is never echoed as the client's input.
 */
export function ingestionOrder(start: string | null | undefined, end: string | null | undefined, sent: 'start' | 'end' = 'start'): ValidationItem | undefined {
  if (!start || !end || start <= end) return undefined;
  if (sent === 'end') return { type: 'value_error', loc: ['body', 'ingestion_end'], msg: 'Value error, ingestion_end must not be before ingestion_start', input: end };
  return { type: 'value_error', loc: ['body', 'ingestion_start'], msg: 'Value error, ingestion_start must not be after ingestion_end', input: start };
}

export type PatchResult = 'patched' | 'missing' | 'conflict' | { invalid: ValidationItem[] };

/**
 * Applies a checked patch to the team's user: the ingestion bounds are
 * checked against the stored ones, the document is built again from the
 * stored one with the change (src/user-document/document.ts), and a
 * client_user_id another live user of the team holds is refused by the
 * unique index ('conflict'). A value is stored as set by `manual` now.
 *
 * The row is read (with the other patches' reads of its turn: one query,
 * src/users/batched-lookups.ts), then written only if it is still the
 * version read (its xmin), in one statement that also keeps the team's
 * state: the team's row, which every write of the team updates, is locked
 * only for that statement (and the team's other writes that go out with
 * it: src/writes/team-batches.ts) and its commit, not for a transaction of
 * several round trips. A row changed in between is read again.
 */
export async function patchUser(sql: Sql, teamId: string, userId: string, patch: UserPatch): Promise<PatchResult> {
  const now = parsePgTime(new Date().toISOString())!.text;
  for (;;) {
    const row = await findVersionedDocBatched(sql, teamId, userId);
    if (!row) return 'missing';
    const user = parseUserDocument(row.doc);
    const start = patch.ingestion_start !== undefined ? patch.ingestion_start : user.ingestion_start;
    const end = patch.ingestion_end !== undefined ? patch.ingestion_end : user.ingestion_end;
    // Two bounds sent were checked against each other (checkPatchBody): a problem here is one sent against one stored.
    const order = ingestionOrder(start, end, patch.ingestion_start !== undefined ? 'start' : 'end');
    if (order) return { invalid: [order] };

    if (patch.client_user_id != null) user.client_user_id = patch.client_user_id;
    if (patch.fallback_time_zone !== undefined) {
      user.fallback_time_zone = patch.fallback_time_zone === null ? null : { id: patch.fallback_time_zone, source_slug: 'manual', updated_at: now };
    }
    if (patch.fallback_birth_date !== undefined) {
      user.fallback_birth_date = patch.fallback_birth_date === null ? null : { value: patch.fallback_birth_date, source_slug: 'manual', updated_at: now };
    }
    user.ingestion_start = start ?? null;
    user.ingestion_end = end ?? null;
    try {
      if (await writePatched(sql, teamId, userId, row.version, user, row.doc)) return 'patched';
    } catch (err) {
      if (isUniqueViolation(err)) return 'conflict';
      throw err;
    }
  }
}

/**
 * Writes the user as `user`, if its row is still at `version`; true when it
 * was. A `user.updated` event is recorded when the User object changed (a
 * value, or when and by whom one was set): not when `doc`, the stored one,
 * is what the patch makes again.
 */
async function writePatched(sql: Sql, teamId: string, userId: string, version: string, user: UserDocInput<string>, doc: string): Promise<boolean> {
  const tz = user.fallback_time_zone;
  const bd = user.fallback_birth_date;
  const patched = userDocument(user);
  // Times are bound as text: the driver would turn a timestamptz parameter into a JS Date and drop the microseconds.
  const written = await retryingDeadlocks(() => teamWrite(sql, teamId, (q) => q`
    WITH changed AS (
      UPDATE users SET
        client_user_id = ${user.client_user_id},
        fallback_time_zone = ${tz?.id ?? null}, fallback_time_zone_source = ${tz?.source_slug ?? null},
        fallback_time_zone_updated_at = ${tz?.updated_at ?? null}::text::timestamptz,
        fallback_birth_date = ${bd?.value ?? null}, fallback_birth_date_source = ${bd?.source_slug ?? null},
        fallback_birth_date_updated_at = ${bd?.updated_at ?? null}::text::timestamptz,
        ingestion_start = ${user.ingestion_start}, ingestion_end = ${user.ingestion_end},
        doc = ${patched}
      WHERE team_id = ${teamId} AND user_id = ${userId} AND xmin = ${version}::xid
      RETURNING user_id, client_user_id, doc
    ), changed_events AS (
      SELECT 'user.updated' AS event_type, user_id, client_user_id, doc AS data FROM changed WHERE ${patched !== doc}
    ), ${teamChange(q, teamId, { changed: 'changed', events: 'changed_events' })}
    SELECT 1 FROM changed`));
  return written.length === 1;
}

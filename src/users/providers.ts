import type { Sql } from '../db/client.js';
import { parseUserDocument, userDocument, type SourceRef } from '../user-document/document.js';
import { retryingDeadlocks } from './retry.js';
import { teamChange } from '../writes/team-state.js';

/**
 * Source slugs the upstream's SDK names (its Providers enum). A slug in
 * neither this list nor the sources catalogue is no source at all: 422 on
 * deregister; one of these that no user has connected is just not connected.
 */
const UPSTREAM_PROVIDERS = new Set([
  'oura', 'fitbit', 'garmin', 'whoop', 'strava', 'renpho', 'peloton', 'wahoo', 'zwift', 'freestyle_libre',
  'abbott_libreview', 'freestyle_libre_ble', 'eight_sleep', 'withings', 'apple_health_kit', 'manual', 'ihealth',
  'google_fit', 'beurer_api', 'beurer_ble', 'omron', 'omron_ble', 'onetouch_ble', 'accuchek_ble', 'contour_ble',
  'dexcom', 'dexcom_v3', 'hammerhead', 'my_fitness_pal', 'health_connect', 'polar', 'cronometer', 'kardia',
  'whoop_v2', 'ultrahuman', 'my_fitness_pal_v2', 'map_my_fitness', 'runkeeper',
]);

/** Whether `slug` names a source: the upstream's, or one in this service's catalogue (imports add to it). */
export async function isKnownSource(sql: Sql, slug: string): Promise<boolean> {
  if (UPSTREAM_PROVIDERS.has(slug)) return true;
  const rows = await sql`SELECT 1 FROM sources WHERE slug = ${slug}`;
  return rows.length > 0;
}

/**
 * `{"providers": [...]}` of a user, from its stored document: its connected
 * sources in the document's order (connection time, then slug), each with
 * the status fields of the upstream's answer.
 */
export function providersBody(doc: Buffer): string {
  const providers = parseUserDocument(doc.toString()).connected_sources.map(({ created_on, source }) => ({
    name: source.name, slug: source.slug, logo: source.logo, created_on,
    status: 'connected', external_user_id: null, error_details: null, resource_availability: {},
  }));
  return JSON.stringify({ providers });
}

export type DeregisterResult = 'removed' | 'missing' | 'not_connected';

/**
 * The data of a `provider.connection.*` event (contract section 10): the
 * source as the user's document has it, under both of the upstream's names.
 */
export function connectionEventData(userId: string, source: SourceRef, extra = ''): string {
  const json = JSON.stringify({ name: source.name, slug: source.slug, logo: source.logo });
  return `{"user_id":"${userId}","provider":${json},"source":${json}${extra}}`;
}

/**
 * Removes the connection of the team's user to the source `slug`, with the
 * user's row locked: its document is built again without it, the team's
 * state follows, and a `provider.connection.deleted` event is recorded.
 */
export async function deregisterProvider(sql: Sql, teamId: string, userId: string, slug: string): Promise<DeregisterResult> {
  return retryingDeadlocks(() => sql.begin(async (tx) => {
    const [row] = await tx<{ doc: string }[]>`SELECT doc FROM users WHERE team_id = ${teamId} AND user_id = ${userId} FOR UPDATE`;
    if (!row) return 'missing';
    const user = parseUserDocument(row.doc);
    const removed = user.connected_sources.find((cs) => cs.source.slug === slug);
    if (!removed) return 'not_connected';
    const kept = user.connected_sources.filter((cs) => cs !== removed);
    await tx`
      WITH gone AS (
        DELETE FROM user_sources us USING sources s
        WHERE us.user_id = ${userId} AND s.source_id = us.source_id AND s.slug = ${slug}
        RETURNING us.created_on
      ), doc AS (
        UPDATE users SET doc = ${userDocument({ ...user, connected_sources: kept })} WHERE team_id = ${teamId} AND user_id = ${userId}
        RETURNING user_id, client_user_id
      ), doc_events AS (
        SELECT 'provider.connection.deleted' AS event_type, user_id, client_user_id, ${connectionEventData(userId, removed.source)}::text AS data FROM doc
      ), ${teamChange(tx, teamId, { unlinked: 'gone', changed: 'doc', events: 'doc_events' })}
      SELECT 1`;
    return 'removed';
  }));
}

import type { Sql } from '../db/client.js';
import { parseUserDocument, userDocument } from '../user-document/document.js';
import { comparePgTimes, parsePgTime } from '../user-document/pg-time.js';
import { retryingDeadlocks } from './retry.js';
import { connectionEventData } from './providers.js';
import { teamChange } from '../writes/team-state.js';

/** The sources the upstream's sandbox connects without a device (contract section 9), in the catalogue since migrations/011. */
export const DEMO_PROVIDERS = ['apple_health_kit', 'fitbit', 'freestyle_libre', 'oura'] as const;
export type DemoProvider = (typeof DEMO_PROVIDERS)[number];

export type ConnectResult = 'connected' | 'already_connected' | 'missing';

/**
 * Connects the team's user to the demo source `slug`, now, with the user's
 * row locked (as a disconnection does): the connection is written, the
 * document built again with it in its place (connection time, then slug),
 * the team's state follows (its counts and connection weeks), and a
 * `provider.connection.created` event is recorded, in one statement. A
 * source the user has connected already changes nothing.
 */
export async function connectDemoSource(sql: Sql, teamId: string, userId: string, slug: DemoProvider): Promise<ConnectResult> {
  // Times as PostgreSQL writes them (microseconds, +00:00), bound as text: the driver would drop the microseconds of a Date.
  const now = parsePgTime(new Date().toISOString())!;
  return retryingDeadlocks(() => sql.begin(async (tx) => {
    const [row] = await tx<{ doc: string }[]>`SELECT doc FROM users WHERE team_id = ${teamId} AND user_id = ${userId} FOR UPDATE`;
    if (!row) return 'missing';
    const user = parseUserDocument(row.doc);
    if (user.connected_sources.some((cs) => cs.source.slug === slug)) return 'already_connected';
    const [source] = await tx<{ source_id: number; name: string; logo: string }[]>`SELECT source_id, name, logo FROM sources WHERE slug = ${slug}`;
    if (!source) throw new Error(`the demo source ${slug} is not in the catalogue (migrations/011)`);
    const link = { created_on: now.text, source: { name: source.name, slug, logo: source.logo } };
    const connected = [...user.connected_sources, link].sort((a, b) =>
      comparePgTimes(parsePgTime(a.created_on)!, parsePgTime(b.created_on)!) || (a.source.slug < b.source.slug ? -1 : a.source.slug > b.source.slug ? 1 : 0));
    await tx`
      WITH linked AS (
        INSERT INTO user_sources (user_id, source_id, created_on) VALUES (${userId}, ${source.source_id}, ${now.text}::timestamptz)
        RETURNING created_on
      ), doc AS (
        UPDATE users SET doc = ${userDocument({ ...user, connected_sources: connected })} WHERE team_id = ${teamId} AND user_id = ${userId}
        RETURNING user_id, client_user_id
      ), doc_events AS (
        SELECT 'provider.connection.created' AS event_type, user_id, client_user_id,
          ${connectionEventData(userId, link.source, ',"resource_availability":{}')}::text AS data
        FROM doc
      ), ${teamChange(tx, teamId, { linked: 'linked', changed: 'doc', events: 'doc_events' })}
      SELECT 1`;
    return 'connected';
  }));
}

import type { Sql } from '../db/client.js';

/**
 * Yields the team's users as JSON Lines in list order, in the import shape:
 * the API's User object without `provider`, the deprecated copy of `source`,
 * so that exporting what was imported gives back the same values.
 * A cursor keeps memory flat whatever the team's size.
 */
export async function* exportUsers(sql: Sql, teamId: string): AsyncGenerator<string> {
  const cursor = sql<{ doc: string }[]>`
    SELECT doc FROM users WHERE team_id = ${teamId} ORDER BY position`.cursor(1000);
  for await (const rows of cursor) {
    let chunk = '';
    for (const { doc } of rows) {
      const user = JSON.parse(doc) as { connected_sources: { provider?: unknown }[] };
      for (const cs of user.connected_sources) delete cs.provider;
      chunk += JSON.stringify(user) + '\n';
    }
    yield chunk;
  }
}

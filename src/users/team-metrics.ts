import type { Sql } from '../db/client.js';
import { weekOfInstant } from '../user-document/pg-time.js';

/** How many weeks `number_of_connected_sources_by_week` covers, the current one last. */
const METRIC_WEEKS = 12;

export interface TeamMetrics {
  team_id: string;
  number_of_users: number;
  number_of_connected_sources: number;
  number_of_errored_connected_sources: number;
  /** Per week (its Monday, UTC): `value` connections made that week, `all` connections made up to its end; live users' only. */
  number_of_connected_sources_by_week: { date: string; value: number; all: number }[];
  number_of_ordered_tests: number;
}

const WEEK_MS = 7 * 86_400_000;

/** The Monday (UTC) of this week: the last week of the metrics' series, so what their answer depends on besides the team's data. */
export function currentWeek(now = Date.now()): string {
  return weekOfInstant(now);
}

/** A team's metrics with what they were read at: the team's version (teams.version, migrations/003) and the current week. */
export interface TeamMetricsRead {
  metrics: TeamMetrics;
  version: string;
  week: string;
}

/**
 * The team's counts, read from what is kept with every write (teams and
 * team_source_weeks, migrations/005): nothing here counts users or
 * connections. Undefined when the team does not exist.
 */
export async function teamMetrics(sql: Sql, teamId: string, now = Date.now()): Promise<TeamMetricsRead | undefined> {
  const weeks = Array.from({ length: METRIC_WEEKS }, (_, i) => weekOfInstant(now - (METRIC_WEEKS - 1 - i) * WEEK_MS));
  const rows = await sql<{ version: string; users: string; connected: string; week: string | null; connections: number | null }[]>`
    SELECT t.version::text AS version, t.user_count::text AS users, t.connected_sources::text AS connected, w.week::text AS week, w.connections
    FROM teams t
    LEFT JOIN team_source_weeks w ON w.team_id = t.team_id AND w.week >= ${weeks[0]!}::date AND w.connections <> 0
    WHERE t.team_id = ${teamId}
    ORDER BY w.week`;
  const [first] = rows;
  if (!first) return undefined;
  const connected = Number(first.connected);
  const byWeek = new Map(rows.filter((r) => r.week !== null).map((r) => [r.week!, r.connections!]));
  // Connections made after a week (later weeks of the window, or dated in the future) are not in its `all`.
  let after = [...byWeek].filter(([week]) => week > weeks.at(-1)!).reduce((sum, [, n]) => sum + n, 0);
  const series: TeamMetrics['number_of_connected_sources_by_week'] = [];
  for (const week of [...weeks].reverse()) {
    const value = byWeek.get(week) ?? 0;
    series.push({ date: week, value, all: connected - after });
    after += value;
  }
  const metrics = {
    team_id: teamId,
    number_of_users: Number(first.users),
    number_of_connected_sources: connected,
    number_of_errored_connected_sources: 0,
    number_of_connected_sources_by_week: series.reverse(),
    number_of_ordered_tests: 0,
  };
  return { metrics, version: first.version, week: weeks.at(-1)! };
}

import { randomUUID } from 'node:crypto';
import type { Config } from './config.js';
import type { Sql } from './db/client.js';
import type { Database } from './db/database.js';
import { issueKey, issueManagementKey } from './auth/issue-key.js';
import { findOrg } from './management/org.js';
import { createTeam } from './teams/team-store.js';

const SOURCES = [
  ['Oura', 'oura'], ['Fitbit', 'fitbit'], ['Garmin', 'garmin'], ['WHOOP', 'whoop_v2'], ['Withings', 'withings'],
  ['Apple HealthKit', 'apple_health_kit'], ['Dexcom', 'dexcom_v3'], ['Freestyle Libre', 'freestyle_libre'],
].map(([name, slug]) => ({ name: name!, slug: slug!, logo: `https://storage.example.com/providers/${slug}.png` }));
const ZONES = ['Europe/London', 'America/New_York', 'Europe/Berlin', 'Asia/Tokyo', 'Australia/Sydney'];

export const DEMO_USERS = 300;

function* demoUsers(teamId: string, count: number): Generator<string> {
  const start = Date.now() - 365 * 86400_000;
  for (let i = 0; i < count; i++) {
    const created = start + Math.floor((i / count) * 360 * 86400_000) + Math.floor(Math.random() * 86400_000);
    const iso = (ms: number) => new Date(ms).toISOString().replace('Z', '+00:00');
    const sources = SOURCES.filter(() => Math.random() < 0.25)
      .map((source) => ({ created_on: iso(created + Math.floor(Math.random() * 5 * 86400_000)), source }));
    yield JSON.stringify({
      user_id: randomUUID(),
      team_id: teamId,
      client_user_id: `demo-user-${String(i + 1).padStart(4, '0')}`,
      created_on: iso(created),
      connected_sources: sources,
      fallback_time_zone: i % 3 === 0 ? null : { id: ZONES[i % ZONES.length], source_slug: 'manual', updated_at: iso(created + 3600_000) },
      fallback_birth_date: i % 2 === 0 ? null : { value: `19${60 + (i % 40)}-0${1 + (i % 9)}-1${i % 10}`, source_slug: 'manual', updated_at: iso(created + 7200_000) },
      ingestion_start: null,
      ingestion_end: null,
    });
  }
}

async function* asAsync<T>(items: Iterable<T>): AsyncGenerator<T> {
  yield* items;
}

/** What the first start made, for its banner: the demo team's key, and a management key of the organisation. */
export interface Demo {
  teamId: string;
  key: string;
  orgId: string;
  managementKey: string;
}

/** A demo team with users and a key, and a management key, for the first start of an empty embedded database. */
export async function seedDemo(sql: Sql): Promise<Demo> {
  const teamId = await createTeam(sql, 'Demo team');
  // Loaded here, not with the server: the import's modules (and its compiled line schema) are otherwise never needed by it.
  const { importUsers } = await import('./import/import.js');
  await importUsers(sql, asAsync(demoUsers(teamId, DEMO_USERS)));
  const { key } = await issueKey(sql, teamId, 'demo key');
  const { key: managementKey } = await issueManagementKey(sql, 'first start');
  return { teamId, key, orgId: (await findOrg(sql)).id, managementKey };
}

async function isEmpty(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ empty: boolean }[]>`SELECT NOT EXISTS (SELECT 1 FROM teams) AS empty`;
  return row?.empty ?? true;
}

/** Seeds the demo on the first start of an empty embedded database, and never with DATABASE_URL. */
export async function seedDemoOnFirstStart(db: Database, config: Config): Promise<Demo | undefined> {
  return db.embedded && config.demoSeed && (await isEmpty(db.sql)) ? seedDemo(db.sql) : undefined;
}

/** Tells a newcomer what was created, with ready-to-paste requests (stdout: the curl lines alone). */
export function announceDemo(demo: Demo, port: number, say: (msg: string) => void): void {
  say(`first start: created a demo team ${demo.teamId} with ${DEMO_USERS} users and an API key. Try:`);
  process.stdout.write(`curl -s -H 'x-service-api-key: ${demo.key}' 'http://127.0.0.1:${port}/v2/user/?limit=5'\n`);
  say(`and a management key of the organisation ${demo.orgId} (the Management API; more with \`hds management-keys create\`). Its teams:`);
  process.stdout.write(`curl -s -H 'x-management-key: ${demo.managementKey}' 'http://127.0.0.1:${port}/v1/org/${demo.orgId}/team'\n`);
}

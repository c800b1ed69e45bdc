import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Sql } from './client.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));
// Any constant works; it only has to be the same for every process of this service.
const MIGRATION_LOCK = 7_150_042;

export interface Migration { version: number; name: string; sql: string }

export function migrationFiles(dir = MIGRATIONS_DIR): Migration[] {
  return fs.readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.split('_')[0]), name: f, sql: fs.readFileSync(dir + f, 'utf8') }));
}

/**
 * Applies the migrations not yet applied, in order, in one transaction under
 * an advisory lock: instances starting at the same time apply each file once.
 * Returns the names of the files applied.
 */
export async function migrate(sql: Sql): Promise<string[]> {
  return sql.begin(async (tx) => {
    // Migrations rewrite whole tables: the pool's request-sized statement timeout does not apply.
    await tx`SET LOCAL statement_timeout = 0`;
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      version int PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`;
    const done = new Set((await tx<{ version: number }[]>`SELECT version FROM schema_migrations`).map((r) => r.version));
    const applied: string[] = [];
    for (const m of migrationFiles()) {
      if (done.has(m.version)) continue;
      await tx.unsafe(m.sql);
      await tx`INSERT INTO schema_migrations (version, name) VALUES (${m.version}, ${m.name})`;
      applied.push(m.name);
    }
    return applied;
  });
}

let latestVersion: number | undefined;

/** True when every migration file has been applied (readiness check). */
export async function migrationsCurrent(sql: Sql): Promise<boolean> {
  // The files do not change while the process runs: read them once, not on every probe.
  const latest = (latestVersion ??= Math.max(0, ...migrationFiles().map((m) => m.version)));
  const [row] = await sql<{ v: number | null }[]>`
    SELECT max(version) AS v FROM schema_migrations`.catch(() => [{ v: null }]);
  return (row?.v ?? 0) >= latest;
}

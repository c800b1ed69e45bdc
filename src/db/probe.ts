import postgres from 'postgres';
import type { Sql } from './client.js';

/**
 * The health probes' own connections (the read router's per replica, the
 * freeze guard's on the primary): one connection kept open, so that a probe
 * is one round trip. No array-type fetch on connect: postgres.js leaves that
 * query's failure unhandled when a probe is dropped mid-connect.
 */
export function openProbe(url: string, connectTimeoutS: number, applicationName: string): Sql {
  return postgres(url, {
    max: 1, connect_timeout: connectTimeoutS, idle_timeout: 0, fetch_types: false, onnotice: () => {},
    connection: { application_name: applicationName },
  });
}

/** Ends a probe's connection at once, whatever it was waiting for. */
export async function closeProbe(probe: Sql | undefined): Promise<void> {
  await probe?.end({ timeout: 0 }).catch(() => {});
}

/** host:port/database of a URL, never its password: how databases are named in logs and stats. */
export function databaseName(url: string, fallback: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return fallback;
  }
}

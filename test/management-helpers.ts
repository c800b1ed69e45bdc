/**
 * What the Management API's tests share: a management key of the test
 * database's organisation, and requests made with it.
 */
import type { App } from '../src/app.js';
import { issueManagementKey } from '../src/auth/issue-key.js';
import type { Sql } from '../src/db/client.js';
import { findOrg } from '../src/management/org.js';

export const MANAGEMENT_KEY = /^hdsm_[A-Za-z0-9_-]{43}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A date-time as the API writes it (contract section 3). */
export const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$/;

export interface Management {
  key: string;
  keyId: string;
  orgId: string;
  /** `/v1/org/{org_id}` */
  base: string;
}

/** A new management key of the deployment's organisation. */
export async function managementKey(sql: Sql, label = 'test'): Promise<Management> {
  const { key, keyId } = await issueManagementKey(sql, label);
  const { id } = await findOrg(sql);
  return { key, keyId, orgId: id, base: `/v1/org/${id}` };
}

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

/** A request to `app` with the management key `key`, with a JSON body when one is given. */
export function manage(app: App, key: string, method: Method, url: string, payload?: object) {
  return app.inject({ method, url, headers: { 'x-management-key': key }, ...(payload ? { payload } : {}) });
}

/** Follows `next_cursor` from the first page to the last; answers every page's body. */
export async function allPages(app: App, key: string, url: string): Promise<Record<string, any>[]> {
  const pages: Record<string, any>[] = [];
  let cursor: string | null = null;
  do {
    const sep = url.includes('?') ? '&' : '?';
    const res = await manage(app, key, 'GET', cursor === null ? url : `${url}${sep}next_cursor=${encodeURIComponent(cursor)}`);
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
    const body = res.json();
    pages.push(body);
    cursor = body.next_cursor;
    if (pages.length > 10_000) throw new Error(`${url}: the cursor never ends`);
  } while (cursor !== null);
  return pages;
}

import type { FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Sql } from '../db/client.js';
import type { ManagementKeyVerifier } from '../auth/key-verifier.js';
import { invalid } from '../errors/catalogue.js';
import { ErrorMessage, ValidationError } from '../errors/schemas.js';
import { Cursors, type PageKey } from './cursor.js';
import { cursorSecret } from './org.js';
import type { UrlPolicy } from './url-check.js';

/** What the Management API's routes are built on. */
export interface ManagementDeps {
  /** The primary: every management read and write goes there (they are few, and must see the latest state). */
  sql: Sql;
  verifier: ManagementKeyVerifier;
  config: Pick<Config, 'environment' | 'region' | 'webhookAllowPrivate'>;
  /** How endpoint URLs' names are resolved (tests give their own); node:dns by default. */
  lookup?: UrlPolicy['lookup'];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Ids a management action concerns, for its log line (never a key, a secret, a URL or a header value). */
    managementAudit: Record<string, string | string[]> | null;
  }
}

/** Notes ids on the request's `management action` log line. */
export function audit(request: FastifyRequest, ids: Record<string, string | string[]>): void {
  request.managementAudit = { ...request.managementAudit, ...ids };
}

export const SECURITY: Record<string, string[]>[] = [{ managementKey: [] }];
export const TAGS = ['management'];

/** Answers every management route may give. */
export const COMMON_ERRORS = {
  401: Type.Ref(ErrorMessage, { description: 'Missing, malformed, unknown or revoked management key (a team key never works here)' }),
  422: Type.Ref(ValidationError, { description: 'Invalid path, query or body value, or a cursor this list did not make' }),
  429: Type.Ref(ErrorMessage, { description: 'Rate limit exceeded' }),
  503: Type.Ref(ErrorMessage, { description: 'Database unavailable or shutting down' }),
};
export const BODY_ERRORS = {
  413: Type.Ref(ErrorMessage, { description: 'Body larger than 16 KiB' }),
  415: Type.Ref(ErrorMessage, { description: 'Body declared in a charset other than UTF-8, or content-encoded' }),
};
export const notFoundAnswer = (description: string) => ({ 404: Type.Ref(ErrorMessage, { description }) });
export const OTHER_ORG = 'Another organisation, environment or region than the deployment\'s';

/** The cursors of the organisation: its secret is read once, on the first list asked for. */
export class ListCursors {
  private cursors: Cursors | undefined;

  constructor(private readonly sql: Sql) {}

  private async get(): Promise<Cursors> {
    this.cursors ??= new Cursors(await cursorSecret(this.sql));
    return this.cursors;
  }

  /** Where the page asked for starts; a 422 when `cursor` was not made by this list. */
  async after(list: string, cursor: string | undefined): Promise<PageKey | undefined> {
    if (cursor === undefined) return undefined;
    const key = (await this.get()).decode(list, cursor);
    if (!key) {
      throw invalid([{ type: 'value_error', loc: ['query', 'next_cursor'], msg: 'Value error, next_cursor was not made by this list', input: cursor }]);
    }
    return key;
  }

  /** The page of `rows` (read with one row more than `limit`) and its next cursor, null at the end. */
  async page<T>(list: string, rows: T[], limit: number, keyOf: (row: T) => PageKey): Promise<{ items: T[]; next_cursor: string | null }> {
    if (rows.length <= limit) return { items: rows, next_cursor: null };
    const items = rows.slice(0, limit);
    return { items, next_cursor: (await this.get()).encode(list, keyOf(items.at(-1)!)) };
  }
}

import { randomBytes, randomUUID } from 'node:crypto';
import type { Sql } from '../db/client.js';
import type { ValidationItem } from '../errors/catalogue.js';
import { endpointUrlProblem, type UrlPolicy } from './url-check.js';
import {
  findWebhookHeaders, insertWebhook, replaceWebhookHeaders, rotateSecret, updateWebhook, type Webhook, type WebhookFields,
} from './webhook-store.js';

/**
 * Webhook endpoints: the one way one is registered, changed, given headers
 * or a new secret, with the rules of contract sections 10 and 11. Free of
 * HTTP: the routes (./webhook-routes.ts) turn the outcomes into answers.
 */

/** How long a replaced secret keeps signing beside the new one (section 11). */
export const SECRET_OVERLAP_MS = 24 * 3600_000;

/** A new signing secret: `whsec_` + base64 of 24 random bytes (section 10). */
export function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/** A secret a client chose: `whsec_` + canonical base64 of 24 to 64 bytes (what Standard Webhooks libraries take). */
export function isWebhookSecret(value: string): boolean {
  const base64 = SECRET.exec(value)?.[1];
  if (base64 === undefined) return false;
  const bytes = Buffer.from(base64, 'base64');
  return bytes.length >= 24 && bytes.length <= 64 && bytes.toString('base64') === base64;
}

export const secretProblem = (loc: (string | number)[], input: string): ValidationItem => ({
  type: 'value_error', loc, msg: 'Value error, a secret is whsec_ followed by the base64 of 24 to 64 bytes', input,
});

export interface NewWebhook extends WebhookFields {
  url: string;
  secret?: string;
}

export type Saved = { webhook: Webhook } | { problems: ValidationItem[] } | 'missing';

async function urlProblems(url: string | undefined, policy: UrlPolicy): Promise<ValidationItem[]> {
  if (url === undefined) return [];
  const problem = await endpointUrlProblem(url, policy);
  return problem === undefined ? [] : [{ type: 'value_error', loc: ['body', 'url'], msg: problem, input: url }];
}

/** Registers an endpoint of the team, with its secret (the one given, or a new one); 'missing' when there is no such team. */
export async function registerWebhook(sql: Sql, teamId: string, input: NewWebhook, policy: UrlPolicy): Promise<Saved> {
  const problems = await urlProblems(input.url, policy);
  if (input.secret !== undefined && !isWebhookSecret(input.secret)) problems.push(secretProblem(['body', 'secret'], input.secret));
  if (problems.length > 0) return { problems };
  const { secret, ...fields } = input;
  const webhook = await insertWebhook(sql, teamId, randomUUID(), fields, secret ?? newSecret());
  return webhook ? { webhook } : 'missing';
}

/** Changes the fields given (a new URL is checked as at registration); 'missing' when the team has no such endpoint. */
export async function changeWebhook(sql: Sql, teamId: string, id: string, fields: WebhookFields, policy: UrlPolicy): Promise<Saved> {
  const problems = await urlProblems(fields.url, policy);
  if (problems.length > 0) return { problems };
  const webhook = await updateWebhook(sql, teamId, id, fields);
  return webhook ? { webhook } : 'missing';
}

/** A new secret for the endpoint (the one given, or a new one); the old one signs beside it for SECRET_OVERLAP_MS. */
export async function rotateWebhookSecret(sql: Sql, teamId: string, id: string, key: string | undefined): Promise<'rotated' | 'missing' | { problems: ValidationItem[] }> {
  if (key !== undefined && !isWebhookSecret(key)) return { problems: [secretProblem(['body', 'key'], key)] };
  return (await rotateSecret(sql, teamId, id, key ?? newSecret(), SECRET_OVERLAP_MS)) ? 'rotated' : 'missing';
}

/** An HTTP token (RFC 9110), the only thing a header name may be. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
/** Visible characters, spaces and tabs: no CR, LF, NUL or other control characters (they would split or break the request). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]{0,4096}$/;
/** Headers the delivery itself sets, or that describe the connection or the body: a custom header may not replace them. */
const RESERVED = new Set([
  'host', 'content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'connection', 'keep-alive',
  'te', 'trailer', 'upgrade', 'expect', 'proxy-connection',
]);
const RESERVED_PREFIXES = ['webhook-', 'svix-'];
export const MAX_HEADERS = 20;

/** What is wrong with a set of custom headers, one 422 item each. */
export function headerProblems(headers: Record<string, string>): ValidationItem[] {
  const problems: ValidationItem[] = [];
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    const loc = ['body', 'headers', name];
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) {
      problems.push({ type: 'value_error', loc, msg: 'Value error, a header name is an HTTP token (letters, digits and !#$%&\'*+-.^_`|~)', input: name });
    } else if (RESERVED.has(lower) || RESERVED_PREFIXES.some((p) => lower.startsWith(p))) {
      problems.push({ type: 'value_error', loc, msg: 'Value error, this header is set by the delivery itself', input: name });
    } else if (seen.has(lower)) {
      problems.push({ type: 'value_error', loc, msg: 'Value error, header names are case-insensitive: this one is given twice', input: name });
    }
    seen.add(lower);
    if (!HEADER_VALUE.test(value)) {
      problems.push({ type: 'value_error', loc, msg: 'Value error, a header value has at most 4096 characters and no control characters but tab', input: null });
    }
  }
  return problems;
}

/** Headers whose values are credentials: never answered (section 11), never logged. */
export function isSensitiveHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === 'authorization' || lower === 'proxy-authorization' || lower === 'cookie'
    || lower.includes('key') || lower.includes('secret') || lower.includes('token');
}

/** Replaces the endpoint's custom headers; 'missing' when the team has no such endpoint. */
export async function setWebhookHeaders(sql: Sql, teamId: string, id: string, headers: Record<string, string>): Promise<'saved' | 'missing' | { problems: ValidationItem[] }> {
  const problems = headerProblems(headers);
  if (problems.length > 0) return { problems };
  return (await replaceWebhookHeaders(sql, teamId, id, headers)) ? 'saved' : 'missing';
}

/** The endpoint's headers as the API shows them: sensitive ones by name only. */
export async function shownWebhookHeaders(sql: Sql, teamId: string, id: string): Promise<{ headers: Record<string, string>; sensitive: string[] } | undefined> {
  const stored = await findWebhookHeaders(sql, teamId, id);
  if (!stored) return undefined;
  const headers: Record<string, string> = {};
  const sensitive: string[] = [];
  for (const name of Object.keys(stored).sort()) {
    if (isSensitiveHeader(name)) sensitive.push(name);
    else headers[name] = stored[name]!;
  }
  return { headers, sensitive };
}

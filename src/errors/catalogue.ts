import { STATUS_CODES } from 'node:http';

/**
 * The error catalogue: every error the API answers with, in the FastAPI
 * `{"detail": ...}` shape the upstream's clients parse. Handlers throw these;
 * src/http/error-handler.ts is the only place that turns anything into a
 * response, except the one pre-rendered answer below. Their schemas, for the
 * OpenAPI document, are in src/errors/schemas.ts.
 */
export interface ValidationItem {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly detail: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof detail === 'string' ? detail : `HTTP ${statusCode}`);
  }
}

export const RETRY_AFTER_S = 1;

export const unauthorized = () =>
  new ApiError(401, 'Invalid or missing API key', { 'www-authenticate': 'ApiKey header="x-service-api-key"' });
/** The same 401 on the Management API: the same body, its WWW-Authenticate naming that API's header. */
export const managementUnauthorized = () =>
  new ApiError(401, 'Invalid or missing API key', { 'www-authenticate': 'ApiKey header="x-management-key"' });
/** Management API: a team the organisation does not have (unknown or deleted: the same answer). */
export const teamNotFound = () => new ApiError(404, 'Team not found');
/** Management API: a webhook endpoint the team does not have (unknown, deleted, or another team's: the same answer). */
export const webhookNotFound = () => new ApiError(404, 'Webhook endpoint not found');
/** Management API: DELETE of a team that still has users, live or scheduled for deletion. */
export const teamHasUsers = () =>
  new ApiError(409, 'The team has users (live or scheduled for deletion): delete them, and wait for the purge, before the team');
/** The resolve route's miss (unknown, another team's, or scheduled for deletion: the same answer). */
export const userNotFound = () => new ApiError(404, 'User not found');
/** GET of a user id the team does not have (unknown or another team's: the same answer). */
export const notFound = () => new ApiError(404, 'Not found');
/** GET of a user the team has scheduled for deletion. */
export const userScheduledForDeletion = () => new ApiError(404, 'You have scheduled this user for deletion.');
/** A change (PATCH, DELETE, providers, deregister) of a user the team does not have. */
export const userGone = () => new ApiError(404, 'The user does not or no longer exists in this team');
/** PATCH or DELETE of a user the team has scheduled for deletion. */
export const deletionAlreadyScheduled = () => new ApiError(404, 'The user has been scheduled for deletion as per your previous request');
/** undo_delete of an id under which none of the team's users is scheduled for deletion. */
export const noDeletionScheduled = () => new ApiError(404, 'No user of this team is scheduled for deletion under this id');
export const providerNotConnected = () => new ApiError(404, 'Provider not connected');
export const nothingToPatch = () => new ApiError(400, 'Nothing to patch');
/** PATCH to, or undo_delete of, a client_user_id another live user of the team holds. */
export const clientUserIdTaken = () => new ApiError(409, 'Client user id already exists');
export const pathNotFound = () => new ApiError(404, 'Not Found');
export const methodNotAllowed = (allow: string[]) => new ApiError(405, 'Method Not Allowed', { allow: allow.join(', ') });
export const payloadTooLarge = () => new ApiError(413, 'Request body too large');
/** A body in another charset than UTF-8, or with a content encoding: it would be read as something it is not. */
export const unsupportedMediaType = () => new ApiError(415, 'Unsupported Media Type');
export const invalid = (items: ValidationItem[]) => new ApiError(422, items);
export const rateLimited = (retryAfterS: number) =>
  new ApiError(429, 'Rate limit exceeded', { 'retry-after': String(Math.max(1, Math.ceil(retryAfterS))) });
/** A refusal of the HTTP parser or the router (a malformed request or URL, headers too large or too slow, …), worded as HTTP names its status. */
export const refusal = (status: number) => new ApiError(status, STATUS_CODES[status] ?? 'Bad Request');
export const internal = () => new ApiError(500, 'Internal Server Error');
export const unavailable = () => new ApiError(503, 'Service Unavailable', { 'retry-after': String(RETRY_AFTER_S) });
/** Create with a client_user_id a live user of the team holds: the upstream's exact strings, which clients match on. */
export const clientUserIdExists = (existing: { user_id: string; created_on: string }) =>
  new ApiError(400, {
    error_type: 'INVALID_REQUEST',
    error_message: 'Client user id already exists.',
    user_id: existing.user_id,
    created_on: existing.created_on,
  });

/** An answer as bytes ready to send, built once. */
export interface RenderedError {
  statusCode: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** The contract's `{"detail": ...}` answer of `error`. */
export function renderError(error: ApiError): RenderedError {
  return { statusCode: error.statusCode, headers: error.headers, body: Buffer.from(JSON.stringify({ detail: error.detail })) };
}

/**
 * The 401, rendered once: every refusal of a key is this same answer (a
 * missing, malformed, unknown, revoked or expired key is not to be told
 * apart), and floods of bad keys are the cheapest answers the service gives,
 * so they are sent without an Error, an error-handler pass or serialisation
 * (src/auth/authenticate.ts; src/http/fast-path/README.md).
 */
export const UNAUTHORIZED = renderError(unauthorized());

/** The Management API's 401, rendered once likewise. */
export const MANAGEMENT_UNAUTHORIZED = renderError(managementUnauthorized());

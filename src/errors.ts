/**
 * The error catalogue: every error the API answers with, in the FastAPI
 * `{"detail": ...}` shape the upstream's clients parse. Handlers throw these;
 * src/http/error-handler.ts is the only place that turns anything into a response.
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
export const userNotFound = () => new ApiError(404, 'User not found');
export const pathNotFound = () => new ApiError(404, 'Not Found');
export const methodNotAllowed = (allow: string[]) => new ApiError(405, 'Method Not Allowed', { allow: allow.join(', ') });
export const payloadTooLarge = () => new ApiError(413, 'Request body too large');
export const invalid = (items: ValidationItem[]) => new ApiError(422, items);
export const rateLimited = (retryAfterS: number) =>
  new ApiError(429, 'Rate limit exceeded', { 'retry-after': String(Math.max(1, Math.ceil(retryAfterS))) });
export const internal = () => new ApiError(500, 'Internal Server Error');
export const unavailable = () => new ApiError(503, 'Service Unavailable', { 'retry-after': String(RETRY_AFTER_S) });
export const clientUserIdExists = (existing: { user_id: string; created_on: string }) =>
  new ApiError(400, {
    error_type: 'client_user_id_already_exists',
    error_message: 'A user with this client_user_id already exists in the team.',
    user_id: existing.user_id,
    created_on: existing.created_on,
  });

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import postgres from 'postgres';
import { ApiError, internal, invalid, pathNotFound, payloadTooLarge, unavailable } from '../errors/catalogue.js';
import { isDatabaseFrozen, isDatabaseUnavailable } from '../db/errors.js';
import { toValidationItems } from '../validation/items.js';

/** Maps anything thrown to the contract's wire format; the one place that does. */
export function toApiError(err: FastifyError, request: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  if (err.validation) return invalid(toValidationItems(err.validationContext ?? 'body', err.validation));
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return payloadTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalid([{ type: 'content_type', loc: ['header', 'content-type'], msg: 'Request body must be JSON (Content-Type: application/json)', input: request.headers['content-type'] ?? null }]);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalid([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return invalid([{ type: 'json_invalid', loc: ['body'], msg: 'JSON decode error', input: null }]);
  }
  if (isDatabaseUnavailable(err)) return unavailable();
  // Other client errors raised by Fastify itself (malformed headers and the like).
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new ApiError(err.statusCode, err.message);
  return internal();
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply.code(error.statusCode).headers(error.headers).send({ detail: error.detail });
}

/**
 * What the log keeps of an unexpected error. PostgreSQL's words may quote the
 * statement's values (`invalid input syntax for type uuid: "…"`, `Key
 * (client_user_id)=(…) already exists`, `Failing row contains (…)`): the
 * team's data, which never goes to the log. Its SQLSTATE, routine and the
 * names it gives say what failed; the stack, without the message, where.
 */
function loggable(err: Error): object {
  if (!(err instanceof postgres.PostgresError)) return err;
  const { code, severity, routine, schema_name, table_name, column_name, constraint_name } = err;
  const stack = err.stack?.split('\n').filter((line) => line.startsWith('    at ')).join('\n');
  return { type: err.name, code, severity, routine, schema_name, table_name, column_name, constraint_name, stack };
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // The client went away in the middle of its body (the stream's ECONNRESET, not a database's): nobody to answer.
    if (request.raw.readableAborted) {
      request.log.info({ err: { code: err.code, message: err.message } }, 'request aborted by the client');
      return reply.code(400).send();
    }
    const error = toApiError(err, request);
    if (error.statusCode >= 500) {
      if (error.statusCode === 503) {
        // A frozen database is logged once per outage by its guard (src/db/freeze-guard.ts), not once per request.
        if (!isDatabaseFrozen(err)) request.log.warn({ err: { code: err.code, message: err.message } }, 'database unavailable');
      } else {
        request.log.error({ err: loggable(err) }, 'unhandled error');
      }
    }
    return sendError(reply, error);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, pathNotFound()));
}

import type { IncomingMessage } from 'node:http';
import { randomUUID } from 'node:crypto';

/**
 * What a request id may be: a caller's `x-request-id` is echoed when it
 * matches, and replaced by a UUID otherwise. Both the id generator below and
 * the request log line (./request-log-line.ts), which writes ids between
 * quotes without escaping them, rely on this one rule: nothing it admits
 * needs escaping in JSON.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Fastify's genReqId: the caller's sane id, or a new UUID. */
export function requestIdFor(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
}

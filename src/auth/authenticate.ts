import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { unauthorized } from '../errors.js';
import { sendError } from '../http/error-handler.js';
import type { Caller, KeyVerifier } from './key-verifier.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

export const API_KEY_HEADER = 'x-service-api-key';

/**
 * Adds an onRequest hook to every route of `scope`: authentication runs
 * before the body is read or anything is validated, so a caller without a
 * valid key learns nothing about the resource.
 */
export function requireApiKey(scope: FastifyInstance, verifier: KeyVerifier): void {
  // Every refusal is the same answer (missing, malformed, unknown, revoked and expired keys are
  // indistinguishable), so it is built once: floods of bad keys cost no Error and no error-handler pass.
  const refusal = unauthorized();
  scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if ((request.routeOptions.config as { skipAuth?: boolean }).skipAuth) return;
    const header = request.headers[API_KEY_HEADER];
    const caller = await verifier.verify(typeof header === 'string' ? header : undefined);
    if (!caller) return sendError(reply, refusal);
    request.caller = caller;
  });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw unauthorized();
  return request.caller;
}

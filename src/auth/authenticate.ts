import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { unauthorized } from '../errors.js';
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
  // indistinguishable), so it is built once, body bytes included: floods of bad keys cost no Error,
  // no error-handler pass and no serialisation.
  const refusal = unauthorized();
  const refusalBody = Buffer.from(JSON.stringify({ detail: refusal.detail }));
  const refuse = (reply: FastifyReply) =>
    reply.code(refusal.statusCode).headers(refusal.headers).type('application/json; charset=utf-8').send(refusalBody);

  // The outcome of a check: the caller is set, or the request refused.
  const decide = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, caller: Caller | undefined) => {
    if (!caller) return void refuse(reply);
    request.caller = caller;
    done();
  };

  // Callback style: a cached or malformed key is judged synchronously, with no promise and no closure per request.
  scope.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const header = request.headers[API_KEY_HEADER];
    const result = verifier.verify(typeof header === 'string' ? header : undefined);
    if (result instanceof Promise) result.then((caller) => decide(request, reply, done, caller), done);
    else decide(request, reply, done, result);
  });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw unauthorized();
  return request.caller;
}

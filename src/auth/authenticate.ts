import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { MANAGEMENT_UNAUTHORIZED, UNAUTHORIZED, unauthorized, type RenderedError } from '../errors/catalogue.js';
import { KEY_NOT_CACHED, type Caller, type KeyVerifier, type ManagementCaller, type ManagementKeyVerifier } from './key-verifier.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
    /** Set on Management API routes once their key is verified (never together with `caller`). */
    managementCaller: ManagementCaller | null;
  }
}

export const API_KEY_HEADER = 'x-service-api-key';
/** The upstream's header, which its SDK sends: accepted too, so that the SDK works configured with its key alone. */
export const UPSTREAM_API_KEY_HEADER = 'x-vital-api-key';
/** The Management API's header (contract section 11); a team key is never accepted in it, nor a management key in the others. */
export const MANAGEMENT_KEY_HEADER = 'x-management-key';

/** Sends the catalogue's pre-rendered 401. */
function refuse(reply: FastifyReply, answer: RenderedError = UNAUTHORIZED): void {
  reply.code(answer.statusCode).headers(answer.headers).type('application/json; charset=utf-8').send(answer.body);
}

/**
 * Adds an onRequest hook to every route of `scope`: authentication runs
 * before the body is read or anything is validated, so a caller without a
 * valid key learns nothing about the resource.
 */
export function requireApiKey(scope: FastifyInstance, verifier: KeyVerifier): void {
  // The outcome of a check: the caller is set, or the request refused.
  const decide = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, caller: Caller | undefined) => {
    if (!caller) return refuse(reply);
    request.caller = caller;
    done();
  };

  // Callback style: a cached or malformed key is judged at once, with no promise and no closure per request.
  scope.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    // Ours wins when both are sent.
    const header = request.headers[API_KEY_HEADER] ?? request.headers[UPSTREAM_API_KEY_HEADER];
    const presented = typeof header === 'string' ? header : undefined;
    const known = verifier.verifyCached(presented);
    if (known !== KEY_NOT_CACHED) return decide(request, reply, done, known);
    verifier.verifyByLookup(presented!).then((caller) => decide(request, reply, done, caller), done);
  });
}

/**
 * The Management API's requireApiKey: an onRequest hook on every route of
 * `scope` that lets through only a valid management key in
 * `x-management-key`. The refusal is section 2's 401, the same body as a
 * team route's (its WWW-Authenticate names this header).
 */
export function requireManagementKey(scope: FastifyInstance, verifier: ManagementKeyVerifier): void {
  const decide = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, caller: ManagementCaller | undefined) => {
    if (!caller) return refuse(reply, MANAGEMENT_UNAUTHORIZED);
    request.managementCaller = caller;
    done();
  };
  scope.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const header = request.headers[MANAGEMENT_KEY_HEADER];
    const presented = typeof header === 'string' ? header : undefined;
    const known = verifier.verifyCached(presented);
    if (known !== KEY_NOT_CACHED) return decide(request, reply, done, known);
    verifier.verifyByLookup(presented!).then((caller) => decide(request, reply, done, caller), done);
  });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw unauthorized();
  return request.caller;
}

import { METHODS } from 'node:http';
import type { FastifyInstance, HTTPMethods } from 'fastify';

/**
 * Every method Node's HTTP parser accepts but CONNECT (which opens no route:
 * src/http/edge-answers.ts answers it): the methods a path's 405 lists as
 * not allowed.
 */
export const EVERY_METHOD = METHODS.filter((m) => m !== 'CONNECT') as HTTPMethods[];

/**
 * Lets routes take every method of EVERY_METHOD: Fastify routes only the
 * common ones by default, and answered PROPFIND, SEARCH, MKCOL and the like
 * on a user path with 404, where the contract wants 405 with Allow.
 */
export function acceptEveryMethod(app: FastifyInstance): void {
  const known = new Set(app.supportedMethods);
  for (const method of EVERY_METHOD) if (!known.has(method)) app.addHttpMethod(method, { hasBody: true });
}

import { METHODS } from 'node:http';
import type { FastifyInstance, FastifySchema, HTTPMethods } from 'fastify';
import { methodNotAllowed } from '../errors/catalogue.js';

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

/**
 * The contract's 405 with Allow for any other method on `routes`' paths
 * (path: the methods it answers), instead of Fastify's 404. Answered without
 * authentication: the method alone says nothing about any resource.
 */
export function methodNotAllowedRoutes(app: FastifyInstance, routes: Record<string, HTTPMethods[]>): void {
  for (const [url, methods] of Object.entries(routes)) {
    const others = EVERY_METHOD.filter((m) => !methods.includes(m));
    const refuse = methodNotAllowed(methods);
    app.route({
      method: others, url, schema: { hide: true } as FastifySchema,
      // In onRequest, before a body is read: QUERY's body wants a content type, and a 405 needs neither.
      onRequest: (_request, _reply, done) => done(refuse),
      handler: async () => { throw refuse; },
    });
  }
}

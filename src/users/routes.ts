import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HookHandlerDoneFunction, HTTPMethods } from 'fastify';
import type { TObject } from '@sinclair/typebox';
import { requireApiKey } from '../auth/authenticate.js';
import { methodNotAllowed, refusal } from '../errors/catalogue.js';
import { EVERY_METHOD } from '../http/methods.js';
import { readRoutes } from './read-routes.js';
import type { UserRoutesDeps } from './route-parts.js';
import { writeRoutes } from './write-routes.js';

export type { UserRoutesDeps } from './route-parts.js';

/** Every path of the user resource and the methods it answers. Fixed segments (metrics, providers, resolve, undo_delete) win over `:user_id`. */
const ROUTES: Record<string, HTTPMethods[]> = {
  '/v2/user/': ['GET', 'HEAD', 'POST'],
  '/v2/user/metrics': ['GET', 'HEAD'],
  '/v2/user/undo_delete': ['POST'],
  '/v2/user/resolve/:client_user_id': ['GET', 'HEAD'],
  '/v2/user/providers/:user_id': ['GET', 'HEAD'],
  '/v2/user/:user_id': ['GET', 'HEAD', 'PATCH', 'DELETE'],
  '/v2/user/:user_id/:provider': ['DELETE'],
  '/v2/team/users/search': ['GET', 'HEAD'],
};

export async function userRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  // The API's routes in a scope of their own, whose hooks check the key: the 405 answers stay outside it.
  await app.register(async (scope) => {
    refuseLongParams(scope);
    requireApiKey(scope, deps.verifier);
    // After the key's hook: the team is known then.
    scope.addHook('onRequest', deps.limitTeam);
    await scope.register(readRoutes, deps);
    await scope.register(writeRoutes, deps);
  });
  methodNotAllowedRoutes(app);
}

/** Characters as the schemas' maxLength counts them: code points. */
const lengthOf = (value: string) => {
  let n = 0;
  for (const _ of value) n++;
  return n;
};

/**
 * A path parameter longer than any valid value (its schema's maxLength) is a
 * 414 that does not echo it, as the router's refusal of a longer one
 * (src/http/edge-answers.ts), and like it before the key is checked: its
 * length alone says nothing about any resource. Validation would answer a
 * 422 holding it as `input`. Every path parameter of the scope's routes
 * must have a maxLength, and one per name.
 */
function refuseLongParams(scope: FastifyInstance): void {
  const longest = new Map<string, number>();
  scope.addHook('onRoute', (route) => {
    const properties = (route.schema?.params as TObject | undefined)?.properties ?? {};
    for (const [name, property] of Object.entries(properties)) {
      const max = property.maxLength as number | undefined;
      if (max === undefined || (longest.get(name) ?? max) !== max) throw new Error(`${route.url}: path parameter ${name} needs one maxLength`);
      longest.set(name, max);
    }
  });
  const tooLong = refusal(414);
  scope.addHook('onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const params = request.params as Record<string, string>;
    for (const name in params) {
      const max = longest.get(name);
      const value = params[name]!;
      if (max !== undefined && value.length > max && lengthOf(value) > max) return done(tooLong);
    }
    done();
  });
}

/**
 * The contract wants 405 with Allow for any other method on these paths, not
 * Fastify's 404. Answered without authentication: the method alone says
 * nothing about any resource.
 */
function methodNotAllowedRoutes(app: FastifyInstance): void {
  for (const [url, methods] of Object.entries(ROUTES)) {
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

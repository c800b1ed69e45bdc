import type { FastifyInstance, HTTPMethods } from 'fastify';
import { requireApiKey } from '../auth/authenticate.js';
import { refuseLongParams } from '../http/long-params.js';
import { methodNotAllowedRoutes } from '../http/methods.js';
import { linkRoutes } from './link-routes.js';
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
  '/v2/link/connect/demo': ['POST'],
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
    await scope.register(linkRoutes, deps);
  });
  methodNotAllowedRoutes(app, ROUTES);
}

import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, HTTPMethods } from 'fastify';
import { requireManagementKey } from '../auth/authenticate.js';
import { pathNotFound } from '../errors/catalogue.js';
import { refuseLongParams } from '../http/long-params.js';
import { methodNotAllowedRoutes } from '../http/methods.js';
import { keyRoutes } from './key-routes.js';
import { messageRoutes } from './message-routes.js';
import { ListCursors, type ManagementDeps } from './route-parts.js';
import { teamRoutes } from './team-routes.js';
import { webhookRoutes } from './webhook-routes.js';

export type { ManagementDeps } from './route-parts.js';

const ORG = '/v1/org/:org_id';
const WEBHOOK = `${ORG}/team/:team_id/:environment/webhook/:webhook_id`;

/** Every path of the Management API and the methods it answers. */
const ROUTES: Record<string, HTTPMethods[]> = {
  [ORG]: ['GET', 'HEAD'],
  [`${ORG}/team`]: ['GET', 'HEAD', 'POST'],
  [`${ORG}/team/:team_id`]: ['GET', 'HEAD', 'PATCH', 'DELETE'],
  [`${ORG}/team_api_keys/:env/:region`]: ['GET', 'HEAD', 'POST', 'DELETE'],
  [`${ORG}/team/:team_id/:environment/webhook`]: ['GET', 'HEAD', 'POST'],
  [WEBHOOK]: ['GET', 'HEAD', 'PATCH', 'DELETE'],
  [`${WEBHOOK}/headers`]: ['GET', 'HEAD', 'PUT'],
  [`${WEBHOOK}/secret`]: ['GET', 'HEAD'],
  [`${WEBHOOK}/secret/rotate`]: ['POST'],
  [`${WEBHOOK}/messages`]: ['GET', 'HEAD'],
  [`${WEBHOOK}/recover`]: ['POST'],
};

/**
 * The Management API (contract section 11): what the admin CLI does for an
 * operator, over HTTP with a management key. In a scope of its own, whose
 * hooks run in this order: a path parameter too long to be valid (414), the
 * management key (401: a team key never passes), then, once the request is
 * validated, a path naming another organisation, environment or region than
 * the deployment's (404). Every answered request of a verified key is logged
 * as a `management action` with the key's id, never the key.
 */
export async function managementRoutes(app: FastifyInstance, deps: ManagementDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.decorateRequest('managementAudit', null);
    refuseLongParams(scope);
    requireManagementKey(scope, deps.verifier);
    scope.addHook('preHandler', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const params = request.params as { org_id: string; env?: string; environment?: string; region?: string };
      const environment = params.env ?? params.environment;
      const own = params.org_id.toLowerCase() === request.managementCaller?.orgId
        && (environment === undefined || environment === deps.config.environment)
        && (params.region === undefined || params.region === deps.config.region);
      done(own ? undefined : pathNotFound());
    });
    scope.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const caller = request.managementCaller;
      if (caller) {
        request.log.info({
          management_key_id: caller.keyId, action: request.routeOptions.schema?.operationId ?? null, status: reply.statusCode,
          ...request.managementAudit,
        }, 'management action');
      }
      done();
    });
    const cursors = new ListCursors(deps.sql);
    await scope.register(teamRoutes, { deps, cursors });
    await scope.register(keyRoutes, { deps, cursors });
    await scope.register(webhookRoutes, { deps, cursors });
    await scope.register(messageRoutes, { deps, cursors });
  });
  methodNotAllowedRoutes(app, ROUTES);
}

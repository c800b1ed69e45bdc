import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { callerOf } from '../auth/authenticate.js';
import { giveBackOnClose } from '../http/fast-path/answer-buffers.js';
import { integerQueryProblems } from '../validation/items.js';
import { invalid, notFound, unauthorized, userGone, userNotFound, userScheduledForDeletion } from '../errors/catalogue.js';
import { providersBody } from './providers.js';
import { COMMON_ERRORS, SECURITY, notFoundAnswer, sendJson, sendUser, sendUsers, type UserRoutesDeps } from './route-parts.js';
import { ClientUserIdParams, ListQuery, ProviderList, SearchQuery, TeamMetrics, UserIdParams, UserList, User } from './schemas.js';

const LIST_BOUNDS = {
  offset: { minimum: ListQuery.properties.offset.minimum!, maximum: ListQuery.properties.offset.maximum! },
  limit: { minimum: ListQuery.properties.limit.minimum!, maximum: ListQuery.properties.limit.maximum! },
};

/** The routes that read users; each answers from src/users/reads.ts. */
export async function readRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { reads } = deps;

  api.get('/v2/user/', {
    schema: {
      summary: "List the team's users",
      description: 'Users of the team that owns the key, ordered by created_on then user_id. The cost of a page does not depend on the offset.',
      tags: ['user'], operationId: 'listUsers', security: SECURITY,
      querystring: ListQuery,
      response: { 200: Type.Ref(UserList), ...COMMON_ERRORS },
    },
    preValidation: async (request) => {
      const problems = integerQueryProblems(request.query as Record<string, unknown>, LIST_BOUNDS);
      if (problems.length > 0) throw invalid(problems);
    },
  }, async (request, reply) => {
    const { offset, limit } = request.query;
    const page = await reads.page(callerOf(request).teamId, offset, limit);
    // No team row: the key's team was deleted between authentication and this read.
    if (!page) throw unauthorized();
    request.auditedUserIds = page.auditIds;
    if (page.lease) giveBackOnClose(reply, reads.pageBuffers, page.lease);
    return sendJson(reply, page.body);
  });

  api.get('/v2/user/metrics', {
    schema: {
      summary: "The team's counts",
      tags: ['user'], operationId: 'getTeamMetrics', security: SECURITY,
      response: { 200: Type.Ref(TeamMetrics), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const metrics = await reads.metrics(callerOf(request).teamId);
    if (!metrics) throw unauthorized();
    return metrics;
  });

  api.get('/v2/user/:user_id', {
    schema: {
      summary: 'Get one user',
      tags: ['user'], operationId: 'getUser', security: SECURITY,
      params: UserIdParams,
      response: { 200: Type.Ref(User), ...notFoundAnswer("Not found: no such user in the caller's team, or scheduled for deletion"), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { teamId } = callerOf(request);
    const { user_id } = request.params;
    const user = await reads.byId(teamId, user_id);
    if (user) return sendUser(request, reply, user);
    throw (await reads.isScheduledForDeletion(teamId, user_id)) ? userScheduledForDeletion() : notFound();
  });

  api.get('/v2/user/resolve/:client_user_id', {
    schema: {
      summary: 'Get one user by client_user_id',
      tags: ['user'], operationId: 'resolveUser', security: SECURITY,
      params: ClientUserIdParams,
      response: { 200: Type.Ref(User), ...notFoundAnswer("No live user with this client_user_id in the caller's team"), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const user = await reads.byClientUserId(callerOf(request).teamId, request.params.client_user_id);
    if (!user) throw userNotFound();
    return sendUser(request, reply, user);
  });

  api.get('/v2/user/providers/:user_id', {
    schema: {
      summary: "A user's connected sources",
      tags: ['user'], operationId: 'getConnectedProviders', security: SECURITY,
      params: UserIdParams,
      response: { 200: Type.Ref(ProviderList), ...notFoundAnswer("No such live user in the caller's team"), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const user = await reads.byId(callerOf(request).teamId, request.params.user_id);
    if (!user) throw userGone();
    return sendJson(reply, providersBody(user.doc));
  });

  api.get('/v2/team/users/search', {
    schema: {
      summary: "Find the team's users by user_id or client_user_id",
      tags: ['user'], operationId: 'searchTeamUsers', security: SECURITY,
      querystring: SearchQuery,
      response: { 200: Type.Array(Type.Ref(User)), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    return sendUsers(request, reply, await reads.search(callerOf(request).teamId, request.query.query_id));
  });
}

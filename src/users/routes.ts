import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HTTPMethods } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { callerOf, requireApiKey } from '../auth/authenticate.js';
import { integerQueryProblems } from '../http/validation.js';
import type { KeyVerifier } from '../auth/key-verifier.js';
import type { TeamLimitHook } from '../http/rate-limit.js';
import type { Sql } from '../db/client.js';
import type { ReadRouter } from '../db/read-router.js';
import { clientUserIdExists, invalid, methodNotAllowed, unauthorized, userNotFound } from '../errors.js';
import { createUser, findUserDocByClientUserId, findUserPage, type UserDoc, type UserPage } from './queries.js';
import { findTeamVersionBatched, findUserDocBatched } from './batched-lookups.js';
import type { PageCache } from './page-cache.js';
import {
  ClientUserIdConflict, ClientUserIdParams, CreatedUser, CreateUserBody, ErrorMessage, ListQuery,
  UserIdParams, UserList, User, ValidationError,
} from './schemas.js';

export interface UserRoutesDeps {
  /** Where reads run: a replica when replicas are configured, else the primary (src/db/read-router.ts). */
  reads: ReadRouter;
  /** Pool for writes: the primary. */
  write: Sql;
  verifier: KeyVerifier;
  /** The per-team rate limit (src/http/rate-limit.ts), checked once the key is verified. */
  limitTeam: TeamLimitHook;
  pages: PageCache;
}

const SECURITY = [{ apiKey: [] }];
const LIST_BOUNDS = {
  offset: { minimum: ListQuery.properties.offset.minimum!, maximum: ListQuery.properties.offset.maximum! },
  limit: { minimum: ListQuery.properties.limit.minimum!, maximum: ListQuery.properties.limit.maximum! },
};
const COMMON_ERRORS = {
  401: Type.Ref(ErrorMessage, { description: 'Missing, malformed, unknown, revoked or expired key' }),
  422: Type.Ref(ValidationError, { description: 'Invalid path, query or body value' }),
  429: Type.Ref(ErrorMessage, { description: 'Rate limit exceeded' }),
  503: Type.Ref(ErrorMessage, { description: 'Database unavailable or shutting down' }),
};

/** Sends JSON bytes produced by PostgreSQL as they are: no parse, no re-serialisation. */
function sendJson(reply: FastifyReply, json: Buffer): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json);
}

function sendUser(request: FastifyRequest, reply: FastifyReply, user: UserDoc | undefined): FastifyReply {
  if (!user) throw userNotFound();
  request.returnedUserIds = [user.user_id];
  return sendJson(reply, user.doc);
}

/**
 * A page from memory while the team's version (one batched lookup) is still
 * the one it was read at; otherwise from PostgreSQL, kept for next time.
 * A page of version v is what every snapshot at version v shows, so the two
 * reads need not share a snapshot or a replica.
 */
async function readPage(deps: UserRoutesDeps, teamId: string, offset: number, limit: number): Promise<UserPage | undefined> {
  const known = deps.pages.get(teamId, offset, limit);
  if (known) {
    const version = await deps.reads.read((sql) => findTeamVersionBatched(sql, teamId));
    if (version === undefined) return undefined;
    if (version === known.version) {
      deps.pages.served(teamId, offset, limit, known);
      return known;
    }
  }
  const page = await deps.reads.read((sql) => findUserPage(sql, teamId, offset, limit));
  if (page) deps.pages.store(teamId, offset, limit, page);
  return page;
}

export async function userRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  // The API's routes in a scope of their own, whose hooks check the key: the 405 answers stay outside it.
  await app.register(authenticatedRoutes, deps);
  methodNotAllowedRoutes(app);
}

async function authenticatedRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  requireApiKey(app, deps.verifier);
  // After the key's hook: the team is known then.
  app.addHook('onRequest', deps.limitTeam);

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
    const { teamId } = callerOf(request);
    const { offset, limit } = request.query;
    const page = await readPage(deps, teamId, offset, limit);
    // No team row: the key's team was deleted between authentication and this read.
    if (!page) throw unauthorized();
    if (page.userIds.length > 0) request.returnedUserIds = page.userIds;
    return sendJson(reply, page.body);
  });

  api.get('/v2/user/:user_id', {
    schema: {
      summary: 'Get one user',
      tags: ['user'], operationId: 'getUser', security: SECURITY,
      params: UserIdParams,
      response: { 200: Type.Ref(User), 404: Type.Ref(ErrorMessage, { description: 'User not found in the caller\'s team' }), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { teamId } = callerOf(request);
    const { user_id } = request.params;
    // A replica may lag behind a create that just happened: readConfirmed confirms a miss on the primary.
    const user = await deps.reads.readConfirmed((sql) => findUserDocBatched(sql, teamId, user_id));
    return sendUser(request, reply, user);
  });

  api.get('/v2/user/resolve/:client_user_id', {
    schema: {
      summary: 'Get one user by client_user_id',
      tags: ['user'], operationId: 'resolveUser', security: SECURITY,
      params: ClientUserIdParams,
      response: { 200: Type.Ref(User), 404: Type.Ref(ErrorMessage, { description: 'User not found in the caller\'s team' }), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { teamId } = callerOf(request);
    const { client_user_id } = request.params;
    const user = await deps.reads.readConfirmed((sql) => findUserDocByClientUserId(sql, teamId, client_user_id));
    return sendUser(request, reply, user);
  });

  api.post('/v2/user/', {
    schema: {
      summary: 'Create a user',
      tags: ['user'], operationId: 'createUser', security: SECURITY,
      body: CreateUserBody,
      response: {
        200: CreatedUser,
        400: Type.Ref(ClientUserIdConflict, { description: 'client_user_id already exists in the team' }),
        413: Type.Ref(ErrorMessage, { description: 'Body larger than 16 KiB' }),
        ...COMMON_ERRORS,
      },
    },
  }, async (request) => {
    const { teamId } = callerOf(request);
    const body = request.body;
    if (body.ingestion_start && body.ingestion_end && body.ingestion_start > body.ingestion_end) {
      throw invalid([{ type: 'value_error', loc: ['body', 'ingestion_start'], msg: 'ingestion_start must not be after ingestion_end', input: body.ingestion_start }]);
    }
    const result = await createUser(deps.write, teamId, body);
    if (!result.created) throw clientUserIdExists(result.existing);
    return { user_id: result.user_id, client_user_id: body.client_user_id };
  });
}

/**
 * The contract wants 405 with Allow for any other method on these paths, not
 * Fastify's 404. Answered without authentication: the method alone says
 * nothing about any resource.
 */
function methodNotAllowedRoutes(app: FastifyInstance): void {
  const allowed: Record<string, HTTPMethods[]> = {
    '/v2/user/': ['GET', 'HEAD', 'POST'],
    '/v2/user/:user_id': ['GET', 'HEAD'],
    '/v2/user/resolve/:client_user_id': ['GET', 'HEAD'],
  };
  const every: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
  for (const [url, methods] of Object.entries(allowed)) {
    const others = every.filter((m) => !methods.includes(m));
    app.route({
      method: others, url, schema: { hide: true } as FastifySchema,
      handler: async () => { throw methodNotAllowed(methods); },
    });
  }
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { callerOf } from '../auth/authenticate.js';
import {
  clientUserIdExists, clientUserIdTaken, deletionAlreadyScheduled, invalid, noDeletionScheduled, nothingToPatch,
  providerNotConnected, userGone,
} from '../errors/catalogue.js';
import { ErrorMessage } from '../errors/schemas.js';
import { toValidationItems } from '../validation/items.js';
import { createUser } from './create.js';
import { deleteUser, undoDelete, type UndoTarget } from './deletion.js';
import { checkPatchBody, ingestionOrder, patchUser } from './patch.js';
import { deregisterProvider, isKnownSource } from './providers.js';
import { COMMON_ERRORS, SECURITY, notFoundAnswer, sendUser, type UserRoutesDeps } from './route-parts.js';
import { ClientUserIdConflict, CreateUserBody, DeregisterParams, PatchUserBody, Success, UndoDeleteQuery, User, UserIdParams } from './schemas.js';

const SUCCESS = { success: true };
const CONFLICT = { 409: Type.Ref(ErrorMessage, { description: 'Another live user of the team holds this client_user_id' }) };

/** The routes that change users; each is one call into the module that writes. */
export async function writeRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { reads, write, deletionGraceMs } = deps;

  /** A miss on a user to change: scheduled for deletion, or not the team's at all. */
  const missing = async (teamId: string, userId: string) =>
    ((await reads.isScheduledForDeletion(teamId, userId)) ? deletionAlreadyScheduled() : userGone());

  api.post('/v2/user/', {
    schema: {
      summary: 'Create a user',
      description: 'Answers the whole user. Unknown body fields are ignored.',
      tags: ['user'], operationId: 'createUser', security: SECURITY,
      body: CreateUserBody,
      response: {
        200: Type.Ref(User),
        400: Type.Ref(ClientUserIdConflict, { description: 'client_user_id already exists in the team' }),
        413: Type.Ref(ErrorMessage, { description: 'Body larger than 16 KiB' }),
        415: Type.Ref(ErrorMessage, { description: 'Body declared in a charset other than UTF-8, or content-encoded' }),
        ...COMMON_ERRORS,
      },
    },
  }, async (request, reply) => {
    const body = request.body;
    const order = ingestionOrder(body.ingestion_start, body.ingestion_end);
    if (order) throw invalid([order]);
    const result = await createUser(write, callerOf(request).teamId, body);
    if (!result.created) throw clientUserIdExists(result.existing);
    return sendUser(request, reply, result);
  });

  api.patch('/v2/user/:user_id', {
    schema: {
      summary: 'Change a user',
      description: 'Checked in this order: the user, the body is an object, something to patch, the values, client_user_id unique.',
      tags: ['user'], operationId: 'patchUser', security: SECURITY,
      params: UserIdParams,
      body: PatchUserBody,
      response: {
        204: Type.Null({ description: 'Changed' }),
        400: Type.Ref(ErrorMessage, { description: 'Nothing to patch' }),
        ...notFoundAnswer('No such live user in the team, or scheduled for deletion'),
        ...CONFLICT,
        413: Type.Ref(ErrorMessage, { description: 'Body larger than 16 KiB' }),
        415: Type.Ref(ErrorMessage, { description: 'Body declared in a charset other than UTF-8, or content-encoded' }),
        ...COMMON_ERRORS,
      },
    },
    // The body is judged after the user is known to exist (the contract's order): its problems wait here.
    attachValidation: true,
  }, async (request, reply) => {
    const failed = request.validationError as (Error & { validationContext?: string; validation?: Parameters<typeof toValidationItems>[1] }) | undefined;
    // A bad user_id is answered by the error handler, as on every other route.
    if (failed?.validationContext === 'params') throw failed;
    const { teamId } = callerOf(request);
    const { user_id } = request.params;
    const check = checkPatchBody(request.body, failed?.validationContext === 'body' ? failed.validation : undefined);
    // The user's 404 comes before the body's problems: asked only when there are some.
    if (!check.ok) {
      if (!(await reads.byId(teamId, user_id))) throw await missing(teamId, user_id);
      throw check.nothingToPatch ? nothingToPatch() : invalid(check.items);
    }
    const result = await patchUser(write, teamId, user_id, check.patch);
    if (result === 'missing') throw await missing(teamId, user_id);
    if (result === 'conflict') throw clientUserIdTaken();
    if (result !== 'patched') throw invalid(result.invalid);
    return reply.code(204).send(null);
  });

  api.delete('/v2/user/:user_id', {
    schema: {
      summary: 'Schedule a user for deletion',
      description: 'At once the user leaves the list and its connections are removed; undo_delete restores it within the grace period (DELETION_GRACE), after which it is purged.',
      tags: ['user'], operationId: 'deleteUser', security: SECURITY,
      params: UserIdParams,
      response: { 200: Type.Ref(Success), ...notFoundAnswer('No such live user in the team, or already scheduled for deletion'), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { teamId, keyId } = callerOf(request);
    const { user_id } = request.params;
    if (!(await deleteUser(write, teamId, user_id, keyId, deletionGraceMs))) throw await missing(teamId, user_id);
    request.log.info({ team_id: teamId, key_id: keyId, user_id }, 'user scheduled for deletion');
    return SUCCESS;
  });

  api.post('/v2/user/undo_delete', {
    schema: {
      summary: 'Undo a scheduled deletion',
      description: 'Within the grace period: the user comes back as it was (same id, created_on, values and place in the list), without its connections.',
      tags: ['user'], operationId: 'undoDeleteUser', security: SECURITY,
      querystring: UndoDeleteQuery,
      response: {
        200: Type.Ref(Success),
        ...notFoundAnswer('No user of the team is scheduled for deletion under this id'),
        ...CONFLICT,
        ...COMMON_ERRORS,
      },
    },
  }, async (request) => {
    const { teamId, keyId } = callerOf(request);
    const target = undoTarget(request);
    const result = await undoDelete(write, teamId, target);
    if (result === 'none') throw noDeletionScheduled();
    if (result === 'conflict') throw clientUserIdTaken();
    // The restored user's id, never the target as asked: a client_user_id is the team's own data.
    request.log.info({ team_id: teamId, key_id: keyId, user_id: result.restored }, 'user deletion undone');
    return SUCCESS;
  });

  api.delete('/v2/user/:user_id/:provider', {
    schema: {
      summary: "Disconnect one of a user's sources",
      tags: ['user'], operationId: 'deregisterProvider', security: SECURITY,
      params: DeregisterParams,
      response: { 200: Type.Ref(Success), ...notFoundAnswer('No such live user in the team, or the source is not connected'), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { teamId } = callerOf(request);
    const { user_id, provider } = request.params;
    if (!(await isKnownSource(write, provider))) {
      throw invalid([{ type: 'enum', loc: ['path', 'provider'], msg: 'Input should be a source slug, such as \'oura\'', input: provider }]);
    }
    const result = await deregisterProvider(write, teamId, user_id, provider);
    if (result === 'missing') throw userGone();
    if (result === 'not_connected') throw providerNotConnected();
    return SUCCESS;
  });
}

/** undo_delete's one id: exactly one of the two query parameters. */
function undoTarget(request: FastifyRequest): UndoTarget {
  const { user_id, client_user_id } = request.query as { user_id?: string; client_user_id?: string };
  if ((user_id === undefined) === (client_user_id === undefined)) {
    throw invalid([{
      type: 'value_error', loc: ['query'], msg: 'Value error, give exactly one of user_id and client_user_id',
      input: request.query,
    }]);
  }
  return user_id !== undefined ? { user_id } : { client_user_id: client_user_id! };
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { issueKey, UnknownTeamError } from '../auth/issue-key.js';
import { listActiveKeysPage, revokeKeys } from '../auth/key-store.js';
import { invalid, teamNotFound } from '../errors/catalogue.js';
import { teamExists } from '../teams/team-store.js';
import { integerQueryProblems } from '../validation/items.js';
import {
  audit, BODY_ERRORS, COMMON_ERRORS, notFoundAnswer, OTHER_ORG, SECURITY, TAGS, type ListCursors, type ManagementDeps,
} from './route-parts.js';
import { CreateKeyBody, KeyDeleteQuery, KeyListQuery, KeyRevocation, KeysParams, TeamApiKey, TeamApiKeyList } from './schemas.js';
import { LIMIT_BOUNDS } from './team-routes.js';

const PATH = '/v1/org/:org_id/team_api_keys/:env/:region';

/** Team API keys (contract section 11): issued with the same function as `hds keys create`. */
export async function keyRoutes(app: FastifyInstance, { deps, cursors }: { deps: ManagementDeps; cursors: ListCursors }): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sql } = deps;

  api.get(PATH, {
    schema: {
      summary: 'List team API keys',
      description: 'Keys that work now (neither revoked nor expired), oldest first, paged by cursor; `value` is only the key\'s visible prefix.',
      tags: TAGS, operationId: 'listTeamApiKeys', security: SECURITY,
      params: KeysParams, querystring: KeyListQuery,
      response: { 200: Type.Ref(TeamApiKeyList), ...notFoundAnswer(`No such team, or: ${OTHER_ORG}`), ...COMMON_ERRORS },
    },
    preValidation: async (request) => {
      const problems = integerQueryProblems(request.query as Record<string, unknown>, LIMIT_BOUNDS);
      if (problems.length > 0) throw invalid(problems);
    },
  }, async (request) => {
    const { team_id, next_cursor, limit } = request.query;
    const list = `team_api_keys\n${team_id ?? '*'}`;
    const after = await cursors.after(list, next_cursor);
    if (team_id !== undefined && !(await teamExists(sql, team_id))) throw teamNotFound();
    const rows = await listActiveKeysPage(sql, team_id, after && { createdAt: after.createdOn, id: after.id }, limit + 1);
    const page = await cursors.page(list, rows, limit, (k) => ({ createdOn: k.created_at, id: k.key_id }));
    return {
      api_keys: page.items.map((k) => ({ id: k.key_id, label: k.name, value: k.display_prefix, team_id: k.team_id, created_at: k.created_at })),
      next_cursor: page.next_cursor,
    };
  });

  api.post(PATH, {
    schema: {
      summary: 'Create a team API key',
      description: 'The same as `hds keys create`: `value` is the whole key, shown this once; only its hash is stored.',
      tags: TAGS, operationId: 'createTeamApiKey', security: SECURITY,
      params: KeysParams, body: CreateKeyBody,
      response: { 200: Type.Ref(TeamApiKey), ...notFoundAnswer(`No such team, or: ${OTHER_ORG}`), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { label, team_id } = request.body;
    audit(request, { team_id });
    try {
      const issued = await issueKey(sql, team_id, label);
      audit(request, { api_key_id: issued.keyId });
      return { id: issued.keyId, label, value: issued.key, team_id, created_at: issued.createdAt };
    } catch (err) {
      if (err instanceof UnknownTeamError) throw teamNotFound();
      throw err;
    }
  });

  api.delete(PATH, {
    schema: {
      summary: 'Revoke team API keys',
      description: 'Each `api_key_id` given is revoked: refused everywhere within a second. '
        + '`not_found` names the ids of no key that works now (unknown, or revoked already).',
      tags: TAGS, operationId: 'deleteTeamApiKeys', security: SECURITY,
      params: KeysParams, querystring: KeyDeleteQuery,
      response: { 200: Type.Ref(KeyRevocation), ...notFoundAnswer(OTHER_ORG), ...COMMON_ERRORS },
    },
    // One id is a string, several an array: always an array, before validation.
    preValidation: async (request) => {
      const query = request.query as Record<string, unknown>;
      if (typeof query.api_key_id === 'string') query.api_key_id = [query.api_key_id];
    },
  }, async (request) => {
    const ids = [...new Set(request.query.api_key_id.map((id) => id.toLowerCase()))];
    const revoked = await revokeKeys(sql, ids);
    const done = new Set(revoked);
    audit(request, { api_key_ids: revoked });
    return { success: ids.filter((id) => done.has(id)), failure: [], not_found: ids.filter((id) => !done.has(id)) };
  });
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { invalid, teamHasUsers, teamNotFound } from '../errors/catalogue.js';
import { ErrorMessage } from '../errors/schemas.js';
import { deleteTeam, findTeam, insertTeam, listTeamsPage, updateTeam, type TeamRecord } from '../teams/team-store.js';
import { integerQueryProblems } from '../validation/items.js';
import { findOrg } from './org.js';
import {
  audit, BODY_ERRORS, COMMON_ERRORS, notFoundAnswer, OTHER_ORG, SECURITY, TAGS, type ListCursors, type ManagementDeps,
} from './route-parts.js';
import { CreateTeamBody, Empty, LARGEST_PAGE, Org, OrgParams, PatchTeamBody, Team, TeamList, TeamListQuery, TeamParams } from './schemas.js';

export const LIMIT_BOUNDS = { limit: { minimum: 1, maximum: LARGEST_PAGE } };

/** The organisation and its teams (contract section 11). */
export async function teamRoutes(app: FastifyInstance, { deps, cursors }: { deps: ManagementDeps; cursors: ListCursors }): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sql, config } = deps;
  const shown = (team: TeamRecord) => ({
    id: team.id, name: team.name, created_on: team.created_on, region: config.region, integration_team_id: team.integration_team_id,
  });

  api.get('/v1/org/:org_id', {
    schema: {
      summary: 'The organisation', description: 'One deployment is one organisation; `hds org` prints its id.',
      tags: TAGS, operationId: 'getOrg', security: SECURITY,
      params: OrgParams,
      response: { 200: Type.Ref(Org), ...notFoundAnswer(OTHER_ORG), ...COMMON_ERRORS },
    },
  }, async () => findOrg(sql));

  api.get('/v1/org/:org_id/team', {
    schema: {
      summary: 'List teams',
      description: 'Oldest first, paged by cursor: a page deep in the list costs what the first one does.',
      tags: TAGS, operationId: 'listTeams', security: SECURITY,
      params: OrgParams, querystring: TeamListQuery,
      response: { 200: Type.Ref(TeamList), ...notFoundAnswer(OTHER_ORG), ...COMMON_ERRORS },
    },
    preValidation: async (request) => {
      const problems = integerQueryProblems(request.query as Record<string, unknown>, LIMIT_BOUNDS);
      if (problems.length > 0) throw invalid(problems);
    },
  }, async (request) => {
    const { search_query, next_cursor, limit } = request.query;
    const list = `teams\n${search_query ?? ''}`;
    const after = await cursors.after(list, next_cursor);
    const rows = await listTeamsPage(sql, after && { createdOn: after.createdOn, id: after.id }, limit + 1, search_query);
    const page = await cursors.page(list, rows, limit, (t) => ({ createdOn: t.created_on, id: t.id }));
    return { teams: page.items.map(shown), next_cursor: page.next_cursor };
  });

  api.post('/v1/org/:org_id/team', {
    schema: {
      summary: 'Create a team', description: 'The same as `hds teams create`. Unknown body fields are ignored.',
      tags: TAGS, operationId: 'createTeam', security: SECURITY,
      params: OrgParams, body: CreateTeamBody,
      response: { 200: Type.Ref(Team), ...notFoundAnswer(OTHER_ORG), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { name, integration_team_id, region } = request.body;
    if (region !== undefined && region !== config.region) {
      throw invalid([{ type: 'value_error', loc: ['body', 'region'], msg: `Value error, this deployment serves region ${config.region} only`, input: region }]);
    }
    const team = await insertTeam(sql, { name, integrationTeamId: integration_team_id ?? null });
    audit(request, { team_id: team.id });
    return shown(team);
  });

  api.get('/v1/org/:org_id/team/:team_id', {
    schema: {
      summary: 'Get a team', tags: TAGS, operationId: 'getTeam', security: SECURITY,
      params: TeamParams,
      response: { 200: Type.Ref(Team), ...notFoundAnswer('No such team'), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const team = await findTeam(sql, request.params.team_id);
    if (!team) throw teamNotFound();
    return shown(team);
  });

  api.patch('/v1/org/:org_id/team/:team_id', {
    schema: {
      summary: 'Change a team',
      description: 'Fields left out are kept; `integration_team_id: null` clears it. A body with nothing to change answers the team as it is.',
      tags: TAGS, operationId: 'patchTeam', security: SECURITY,
      params: TeamParams, body: PatchTeamBody,
      response: { 200: Type.Ref(Team), ...notFoundAnswer('No such team'), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id } = request.params;
    const { name, integration_team_id } = request.body;
    audit(request, { team_id });
    const team = name === undefined && integration_team_id === undefined
      ? await findTeam(sql, team_id)
      : await updateTeam(sql, team_id, { name, integrationTeamId: integration_team_id });
    if (!team) throw teamNotFound();
    return shown(team);
  });

  api.delete('/v1/org/:org_id/team/:team_id', {
    schema: {
      summary: 'Delete a team',
      description: 'Only a team without users, live or scheduled for deletion (they are purged after DELETION_GRACE). '
        + 'Its API keys (refused everywhere within a second) and webhook endpoints go with it.',
      tags: TAGS, operationId: 'deleteTeam', security: SECURITY,
      params: TeamParams,
      response: {
        200: Type.Ref(Empty), ...notFoundAnswer('No such team'),
        409: Type.Ref(ErrorMessage, { description: 'The team has users, live or scheduled for deletion' }),
        ...COMMON_ERRORS,
      },
    },
  }, async (request) => {
    const { team_id } = request.params;
    audit(request, { team_id });
    const result = await deleteTeam(sql, team_id);
    if (result === 'missing') throw teamNotFound();
    if (result === 'has_users') throw teamHasUsers();
    return {};
  });
}

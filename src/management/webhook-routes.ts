import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { invalid, teamNotFound, webhookNotFound } from '../errors/catalogue.js';
import { teamExists } from '../teams/team-store.js';
import { integerQueryProblems } from '../validation/items.js';
import {
  audit, BODY_ERRORS, COMMON_ERRORS, notFoundAnswer, SECURITY, TAGS, type ListCursors, type ManagementDeps,
} from './route-parts.js';
import {
  CreateWebhookBody, HeadersBody, PatchWebhookBody, RotateSecretBody, Webhook, WebhookHeaders, WebhookList, WebhookListQuery,
  WebhookParams, WebhookSecret, WebhooksParams,
} from './schemas.js';
import { LIMIT_BOUNDS } from './team-routes.js';
import type { UrlPolicy } from './url-check.js';
import { changeWebhook, registerWebhook, rotateWebhookSecret, setWebhookHeaders, shownWebhookHeaders, type Saved } from './webhooks.js';
import { deleteWebhook, findCurrentSecret, findWebhook, listWebhooksPage } from './webhook-store.js';

const LIST = '/v1/org/:org_id/team/:team_id/:environment/webhook';
const ONE = `${LIST}/:webhook_id`;
const NO_TEAM = 'No such team';
const NO_WEBHOOK = 'No such webhook endpoint in the team';

/** A team's webhook endpoints (contract section 11; delivery is section 10's). */
export async function webhookRoutes(app: FastifyInstance, { deps, cursors }: { deps: ManagementDeps; cursors: ListCursors }): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sql } = deps;
  const policy: UrlPolicy = { allowPrivate: deps.config.webhookAllowPrivate, ...(deps.lookup ? { lookup: deps.lookup } : {}) };

  /** A miss: the team's own, or the endpoint's (another team's endpoint is a missing one). */
  const missing = async (teamId: string) => ((await teamExists(sql, teamId)) ? webhookNotFound() : teamNotFound());
  const saved = async (teamId: string, result: Saved) => {
    if (result === 'missing') throw await missing(teamId);
    if ('problems' in result) throw invalid(result.problems);
    return result.webhook;
  };

  api.get(LIST, {
    schema: {
      summary: "List a team's webhook endpoints", description: 'Oldest first, paged by cursor.',
      tags: TAGS, operationId: 'listWebhooks', security: SECURITY,
      params: WebhooksParams, querystring: WebhookListQuery,
      response: { 200: Type.Ref(WebhookList), ...notFoundAnswer(NO_TEAM), ...COMMON_ERRORS },
    },
    preValidation: async (request) => {
      const problems = integerQueryProblems(request.query as Record<string, unknown>, LIMIT_BOUNDS);
      if (problems.length > 0) throw invalid(problems);
    },
  }, async (request) => {
    const { team_id } = request.params;
    const { next_cursor, limit } = request.query;
    const list = `webhooks\n${team_id}`;
    const after = await cursors.after(list, next_cursor);
    if (!(await teamExists(sql, team_id))) throw teamNotFound();
    const rows = await listWebhooksPage(sql, team_id, after, limit + 1);
    const page = await cursors.page(list, rows, limit, (w) => ({ createdOn: w.created_at, id: w.id }));
    return { data: page.items, next_cursor: page.next_cursor };
  });

  api.post(LIST, {
    schema: {
      summary: 'Register a webhook endpoint',
      description: 'The URL must be https:// and must not point at a loopback, private, link-local or otherwise internal address '
        + '(an IP literal, or a name as it resolves now; a name that does not resolve yet is accepted). '
        + '`filter_types` are event types; null: all. The secret is made when none is given.',
      tags: TAGS, operationId: 'createWebhook', security: SECURITY,
      params: WebhooksParams, body: CreateWebhookBody,
      response: { 200: Type.Ref(Webhook), ...notFoundAnswer(NO_TEAM), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id } = request.params;
    audit(request, { team_id });
    const webhook = await saved(team_id, await registerWebhook(sql, team_id, request.body, policy));
    audit(request, { webhook_id: webhook.id });
    return webhook;
  });

  api.get(ONE, {
    schema: {
      summary: 'Get a webhook endpoint', tags: TAGS, operationId: 'getWebhook', security: SECURITY,
      params: WebhookParams,
      response: { 200: Type.Ref(Webhook), ...notFoundAnswer(NO_WEBHOOK), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id, webhook_id } = request.params;
    const webhook = await findWebhook(sql, team_id, webhook_id);
    if (!webhook) throw await missing(team_id);
    return webhook;
  });

  api.patch(ONE, {
    schema: {
      summary: 'Change a webhook endpoint',
      description: 'Any field of the create but `secret` (rotate it instead); fields left out are kept. A new URL is checked as at registration.',
      tags: TAGS, operationId: 'patchWebhook', security: SECURITY,
      params: WebhookParams, body: PatchWebhookBody,
      response: { 200: Type.Ref(Webhook), ...notFoundAnswer(NO_WEBHOOK), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    const { url, description, rate_limit, disabled, filter_types } = request.body;
    const fields = Object.fromEntries(Object.entries({ url, description, rate_limit, disabled, filter_types }).filter(([, v]) => v !== undefined));
    if (Object.keys(fields).length === 0) {
      const webhook = await findWebhook(sql, team_id, webhook_id);
      if (!webhook) throw await missing(team_id);
      return webhook;
    }
    return saved(team_id, await changeWebhook(sql, team_id, webhook_id, fields, policy));
  });

  api.delete(ONE, {
    schema: {
      summary: 'Delete a webhook endpoint', tags: TAGS, operationId: 'deleteWebhook', security: SECURITY,
      params: WebhookParams,
      response: { 204: Type.Null({ description: 'Deleted' }), ...notFoundAnswer(NO_WEBHOOK), ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    if (!(await deleteWebhook(sql, team_id, webhook_id))) throw await missing(team_id);
    return reply.code(204).send(null);
  });

  api.get(`${ONE}/headers`, {
    schema: {
      summary: "A webhook endpoint's custom headers",
      description: 'Values of sensitive headers (authorization, cookie, and names holding key, secret or token) are not returned: their names are listed in `sensitive`.',
      tags: TAGS, operationId: 'getWebhookHeaders', security: SECURITY,
      params: WebhookParams,
      response: { 200: Type.Ref(WebhookHeaders), ...notFoundAnswer(NO_WEBHOOK), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id, webhook_id } = request.params;
    const headers = await shownWebhookHeaders(sql, team_id, webhook_id);
    if (!headers) throw await missing(team_id);
    return headers;
  });

  api.put(`${ONE}/headers`, {
    schema: {
      summary: "Replace a webhook endpoint's custom headers",
      description: 'Sent with every delivery. Names are HTTP tokens, case-insensitive and not ones the delivery sets itself (content-type, host, webhook-*, svix-*, …); at most 20.',
      tags: TAGS, operationId: 'putWebhookHeaders', security: SECURITY,
      params: WebhookParams, body: HeadersBody,
      response: { 204: Type.Null({ description: 'Replaced' }), ...notFoundAnswer(NO_WEBHOOK), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    const result = await setWebhookHeaders(sql, team_id, webhook_id, request.body.headers);
    if (result === 'missing') throw await missing(team_id);
    if (result !== 'saved') throw invalid(result.problems);
    return reply.code(204).send(null);
  });

  api.get(`${ONE}/secret`, {
    schema: {
      summary: "A webhook endpoint's signing secret", tags: TAGS, operationId: 'getWebhookSecret', security: SECURITY,
      params: WebhookParams,
      response: { 200: Type.Ref(WebhookSecret), ...notFoundAnswer(NO_WEBHOOK), ...COMMON_ERRORS },
    },
  }, async (request) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    const key = await findCurrentSecret(sql, team_id, webhook_id);
    if (key === undefined) throw await missing(team_id);
    return { key };
  });

  api.post(`${ONE}/secret/rotate`, {
    schema: {
      summary: "Rotate a webhook endpoint's signing secret",
      description: 'The new secret (the one given, or a new one) signs from now on; the old one keeps signing beside it for 24 hours. The body may be left out.',
      tags: TAGS, operationId: 'rotateWebhookSecret', security: SECURITY,
      params: WebhookParams, body: RotateSecretBody,
      response: { 204: Type.Null({ description: 'Rotated' }), ...notFoundAnswer(NO_WEBHOOK), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
    // No body at all is an empty one.
    preValidation: async (request) => {
      if (request.body === undefined) request.body = {};
    },
  }, async (request, reply) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    const result = await rotateWebhookSecret(sql, team_id, webhook_id, request.body.key);
    if (result === 'missing') throw await missing(team_id);
    if (result !== 'rotated') throw invalid(result.problems);
    return reply.code(204).send(null);
  });
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { invalid, teamNotFound, webhookNotFound } from '../errors/catalogue.js';
import { teamExists } from '../teams/team-store.js';
import { integerQueryProblems } from '../validation/items.js';
import { listMessagesPage, recoverMessages, type Message, type MessageStatus } from './message-store.js';
import {
  audit, BODY_ERRORS, COMMON_ERRORS, notFoundAnswer, SECURITY, TAGS, type ListCursors, type ManagementDeps,
} from './route-parts.js';
import { Empty, MessageList, MessageListQuery, RecoverBody, WebhookParams } from './schemas.js';
import { LIMIT_BOUNDS } from './team-routes.js';
import { findWebhook } from './webhook-store.js';

const ONE = '/v1/org/:org_id/team/:team_id/:environment/webhook/:webhook_id';
const NO_WEBHOOK = 'No such webhook endpoint in the team';

/** An endpoint's messages and their recovery (contract section 11, ours; the delivery is section 10's, src/events/). */
export async function messageRoutes(app: FastifyInstance, { deps, cursors }: { deps: ManagementDeps; cursors: ListCursors }): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sql } = deps;

  /** The team's endpoint, or its 404 (another team's endpoint is a missing one). */
  const endpoint = async (teamId: string, webhookId: string) => {
    if (await findWebhook(sql, teamId, webhookId)) return;
    throw (await teamExists(sql, teamId)) ? webhookNotFound() : teamNotFound();
  };

  api.get(`${ONE}/messages`, {
    schema: {
      summary: "A webhook endpoint's messages",
      description: 'One per event sent to the endpoint, oldest first, paged by cursor; `status` keeps one state.',
      tags: TAGS, operationId: 'listWebhookMessages', security: SECURITY,
      params: WebhookParams, querystring: MessageListQuery,
      response: { 200: Type.Ref(MessageList), ...notFoundAnswer(NO_WEBHOOK), ...COMMON_ERRORS },
    },
    preValidation: async (request) => {
      const problems = integerQueryProblems(request.query as Record<string, unknown>, LIMIT_BOUNDS);
      if (problems.length > 0) throw invalid(problems);
    },
  }, async (request) => {
    const { team_id, webhook_id } = request.params;
    const { status, next_cursor, limit } = request.query;
    const list = `messages\n${webhook_id}\n${status ?? ''}`;
    const after = await cursors.after(list, next_cursor);
    await endpoint(team_id, webhook_id);
    const rows = await listMessagesPage(sql, webhook_id, status as MessageStatus | undefined, after, limit + 1);
    const page = await cursors.page(list, rows, limit, (m) => ({ createdOn: m.created_at, id: m.event_id }));
    return { data: page.items.map(({ event_id: _, ...message }: Message) => message), next_cursor: page.next_cursor };
  });

  api.post(`${ONE}/recover`, {
    schema: {
      summary: "Send a webhook endpoint's failed messages again",
      description: 'Every `failed` message of the endpoint created at `since` or later is pending again, its retry schedule started anew, '
        + 'with the same id. A disabled endpoint gets them once it is enabled again.',
      tags: TAGS, operationId: 'recoverWebhookMessages', security: SECURITY,
      params: WebhookParams, body: RecoverBody,
      response: { 202: Type.Ref(Empty), ...notFoundAnswer(NO_WEBHOOK), ...BODY_ERRORS, ...COMMON_ERRORS },
    },
  }, async (request, reply) => {
    const { team_id, webhook_id } = request.params;
    audit(request, { team_id, webhook_id });
    await endpoint(team_id, webhook_id);
    await recoverMessages(sql, webhook_id, request.body.since);
    return reply.code(202).send({});
  });
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { callerOf } from '../auth/authenticate.js';
import { notFound, userScheduledForDeletion } from '../errors/catalogue.js';
import { ErrorMessage } from '../errors/schemas.js';
import { connectDemoSource, type DemoProvider } from './connect.js';
import { COMMON_ERRORS, SECURITY, notFoundAnswer, type UserRoutesDeps } from './route-parts.js';
import { ConnectDemoAnswer, ConnectDemoBody } from './schemas.js';

/** Connecting a user to a source (contract section 9): the upstream's demo connection. */
export async function linkRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { reads, write } = deps;

  api.post('/v2/link/connect/demo', {
    schema: {
      summary: 'Connect a user to a demo source',
      description: 'At once the source is in the user\'s connected_sources, its providers and the team\'s metrics, and a '
        + '`provider.connection.created` event is recorded. A source the user has connected already changes nothing (same answer, no event).',
      tags: ['link'], operationId: 'connectDemoProvider', security: SECURITY,
      body: ConnectDemoBody,
      response: {
        200: Type.Ref(ConnectDemoAnswer),
        ...notFoundAnswer('No such user in the team, or scheduled for deletion'),
        413: Type.Ref(ErrorMessage, { description: 'Body larger than 16 KiB' }),
        415: Type.Ref(ErrorMessage, { description: 'Body declared in a charset other than UTF-8, or content-encoded' }),
        ...COMMON_ERRORS,
      },
    },
  }, async (request) => {
    const { teamId } = callerOf(request);
    const { user_id, provider } = request.body;
    const result = await connectDemoSource(write, teamId, user_id, provider as DemoProvider);
    if (result === 'missing') throw (await reads.isScheduledForDeletion(teamId, user_id)) ? userScheduledForDeletion() : notFound();
    if (result === 'connected') request.log.info({ team_id: teamId, user_id, provider }, 'demo source connected');
    return { success: true, detail: `Connected user ${user_id} to provider ${provider}` };
  });
}

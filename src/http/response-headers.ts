import type { FastifyInstance } from 'fastify';

/** Headers on every answer, errors included. */
export function registerResponseHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
  });
}

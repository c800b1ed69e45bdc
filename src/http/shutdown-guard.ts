import type { FastifyInstance } from 'fastify';
import { unavailable } from '../errors/catalogue.js';

/**
 * Once shutdown has begun, a request that still arrives (on a kept-alive
 * connection: the listener is already closed) gets the contract's 503 with
 * Retry-After and `Connection: close`, so the client retries elsewhere.
 * Fastify's own return503OnClosing is off because its body is not ours.
 */
export function registerShutdownGuard(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => { closing = true; });
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    reply.header('connection', 'close');
    done(unavailable());
  });
}

import type { FastifyInstance } from 'fastify';

/** On every answer besides its `x-request-id`, also on those given where no hook runs (src/http/edge-answers.ts). */
export const EVERY_ANSWER_HEADERS = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' } as const;

/**
 * Headers on every answer, errors included. `no-store` everywhere, not only
 * on user data: one hook instead of two per request, and nothing this
 * service answers is worth a shared cache's copy.
 */
export function registerResponseHeaders(app: FastifyInstance): void {
  // Callback-style hooks here and in the other per-request hooks: an async hook costs a promise and a
  // microtask turn on every request, which showed in the cheapest answers (401s).
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    reply.headers(EVERY_ANSWER_HEADERS);
    done(null, payload);
  });
}

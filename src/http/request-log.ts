import type { FastifyInstance } from 'fastify';

/**
 * One JSON line per request. Built from named fields only: headers (the key)
 * and bodies (health data) never reach the log.
 */
export function registerRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info({
      method: request.method,
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(reply.elapsedTime * 100) / 100,
      team_id: request.caller?.teamId ?? null,
      key_id: request.caller?.keyId ?? null,
    }, 'request');
    done();
  });
}

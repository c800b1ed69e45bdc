import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** Ids of the user records this answer returned: the request's log line is then also its audit record. */
    returnedUserIds: string[] | null;
  }
}

/**
 * One JSON line per request. Built from named fields only: headers (the key)
 * and bodies (health data) never reach the log. An answer that returned user
 * records carries `audit.user_ids` on the same line (one write per request,
 * not two).
 */
export function registerRequestLog(app: FastifyInstance): void {
  app.decorateRequest('returnedUserIds', null);
  app.addHook('onResponse', (request, reply, done) => {
    const userIds = request.returnedUserIds;
    request.log.info({
      method: request.method,
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(reply.elapsedTime * 100) / 100,
      team_id: request.caller?.teamId ?? null,
      key_id: request.caller?.keyId ?? null,
      ...(userIds && { audit: { user_ids: userIds } }),
    }, 'request');
    done();
  });
}

import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import type { LogDestination } from './log-destination.js';
import { REQUEST_ID_PATTERN } from './request-id.js';
import { routePattern } from './route-pattern.js';

/** What an IP address is written with; anything else (from a trusted proxy's header) is escaped. */
const ADDRESS_PATTERN = /^[0-9A-Fa-f.:]{1,45}$/;

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The ids of the user records this answer returned, as a JSON array of
     * strings: the request's log line is then also its audit record. Written
     * into the line as it is: whoever sets it makes it valid JSON (a page
     * from the bytes of its documents, src/users/page-body.ts; one user with
     * JSON.stringify).
     */
    auditedUserIds: string | null;
  }
}

/**
 * One JSON line per request. Built from named fields only: headers (the key)
 * and bodies (health data) never reach the log. An answer that returned user
 * records carries `audit.user_ids` on the same line (one write per request,
 * not two).
 *
 * The line is written by hand, in pino's own format (level, time, the
 * logger's bindings, request_id, the fields, msg), straight into the logger's
 * destination, so it is buffered and ordered with every other log line.
 * Through pino's general serializer it cost about 20 µs per request here, a
 * quarter of a refused request's whole cost (401s: 76 µs of CPU each with
 * the line, 56 µs without). Every value is plain by construction and is
 * written between quotes as it is, without JSON.stringify (a visible share
 * of a 401's CPU in a perf profile): ids are UUIDs, or request ids that
 * match REQUEST_ID_PATTERN (checked again here, so that an id from anywhere
 * else is escaped rather than trusted), the route a pattern of ours, the
 * method one of the tokens Node's HTTP parser accepts, the client address
 * an IP address (anything else, from a trusted proxy's header, escaped), the
 * rest numbers.
 * test/logs.test.ts parses every line it makes.
 */
/** Writes the line of an answer no route's hooks saw (src/http/edge-answers.ts): no route, no caller, no audit. */
export type EdgeLineWriter = (id: string, ip: string | undefined, method: string | null, status: number, durationMs: number) => void;

export function registerRequestLog(app: FastifyInstance): EdgeLineWriter | undefined {
  app.decorateRequest('auditedUserIds', null);
  // pino.symbols exposes, for integrations, the destination and the logger's bindings as pino writes them
  // (`,"pid":…,"hostname":…`); neither exists when logging is off (Fastify's no-op logger).
  const logger = app.log as unknown as pino.Logger & Record<symbol, unknown>;
  // writeLine: src/http/fast-path/log-destination.ts, the service's own destination (tests log elsewhere).
  const destination = logger[pino.symbols.streamSym] as { write(line: string): void; writeLine?: LogDestination['writeLine'] } | undefined;
  if (!destination || !logger.isLevelEnabled('info')) return undefined;
  const base = String(logger[pino.symbols.chindingsSym] ?? '');
  const head = (id: string, ip: string | undefined) =>
    `{"level":30,"time":${Date.now()}${base},"request_id":"${REQUEST_ID_PATTERN.test(id) ? id : JSON.stringify(String(id)).slice(1, -1)}"`
    + `,"ip":${typeof ip !== 'string' ? 'null' : ADDRESS_PATTERN.test(ip) ? `"${ip}"` : JSON.stringify(ip)}`;

  app.addHook('onResponse', (request, reply, done) => {
    const caller = request.caller;
    const route = routePattern(request);
    const userIds = request.auditedUserIds;
    const line = `${head(request.id, request.ip)},"method":"${request.method}"`
      + `,"route":${route === null ? 'null' : `"${route}"`},"status":${reply.statusCode}`
      + `,"duration_ms":${Math.round(reply.elapsedTime * 100) / 100}`
      + `,"team_id":${caller ? `"${caller.teamId}"` : 'null'},"key_id":${caller ? `"${caller.keyId}"` : 'null'}`;
    if (userIds === null) destination.write(`${line},"msg":"request"}\n`);
    else if (destination.writeLine) destination.writeLine(`${line},"audit":{"user_ids":`, userIds, '},"msg":"request"}\n');
    else destination.write(`${line},"audit":{"user_ids":${userIds}},"msg":"request"}\n`);
    done();
  });
  return (id, ip, method, status, durationMs) => destination.write(
    `${head(id, ip)},"method":${method === null ? 'null' : JSON.stringify(method)},"route":null,"status":${status}`
    + `,"duration_ms":${Math.round(durationMs * 100) / 100},"team_id":null,"key_id":null,"msg":"request"}\n`);
}

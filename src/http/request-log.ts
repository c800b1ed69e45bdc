import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import pino, { type Bindings, type ChildLoggerOptions, type LogFn } from 'pino';
import { routePattern } from './route-pattern.js';

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
 *
 * The line is written by hand, in pino's own format (level, time, the
 * logger's bindings, request_id, the fields, msg), straight into the logger's
 * destination, so it is buffered and ordered with every other log line.
 * Through pino's general serializer it cost about 20 µs per request here, a
 * quarter of a refused request's whole cost (401s: 76 µs of CPU each with
 * the line, 56 µs without). Every value is plain by construction and is
 * written between quotes as it is, without JSON.stringify (a visible share
 * of a 401's CPU in a perf profile): ids are UUIDs or the request ids
 * src/app.ts accepts ([A-Za-z0-9._:-] only), the route a pattern of ours,
 * the method one of the tokens Node's HTTP parser accepts, the rest
 * numbers. test/logs.test.ts parses every line it makes.
 */
export function registerRequestLog(app: FastifyInstance): void {
  app.decorateRequest('returnedUserIds', null);
  // pino.symbols exposes, for integrations, the destination and the logger's bindings as pino writes them
  // (`,"pid":…,"hostname":…`); neither exists when logging is off (Fastify's no-op logger).
  const logger = app.log as unknown as pino.Logger & Record<symbol, unknown>;
  const destination = logger[pino.symbols.streamSym] as { write(line: string): void } | undefined;
  if (!destination || !logger.isLevelEnabled('info')) return;
  const base = String(logger[pino.symbols.chindingsSym] ?? '');

  app.addHook('onResponse', (request, reply, done) => {
    const caller = request.caller;
    const route = routePattern(request);
    const userIds = request.returnedUserIds;
    destination.write(
      `{"level":30,"time":${Date.now()}${base},"request_id":"${request.id}","method":"${request.method}"`
      + `,"route":${route === null ? 'null' : `"${route}"`},"status":${reply.statusCode}`
      + `,"duration_ms":${Math.round(reply.elapsedTime * 100) / 100}`
      + `,"team_id":${caller ? `"${caller.teamId}"` : 'null'},"key_id":${caller ? `"${caller.keyId}"` : 'null'}`
      + (userIds ? `,"audit":{"user_ids":["${userIds.join('","')}"]}` : '')
      + ',"msg":"request"}\n');
    done();
  });
}

/**
 * Fastify's per-request logger (`request.log`), created only when something
 * logs through it: Fastify makes a pino child per request otherwise (its
 * bindings serialized on every request), and only error paths use it; the
 * request line itself is written above.
 */
class LazyChildLogger {
  private real: FastifyBaseLogger | undefined;

  constructor(private readonly parent: FastifyBaseLogger, private readonly bindings: Bindings, private readonly options: ChildLoggerOptions) {}

  private get logger(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.real?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  fatal(...args: Parameters<LogFn>): void { this.logger.fatal(...args); }
  error(...args: Parameters<LogFn>): void { this.logger.error(...args); }
  warn(...args: Parameters<LogFn>): void { this.logger.warn(...args); }
  info(...args: Parameters<LogFn>): void { this.logger.info(...args); }
  debug(...args: Parameters<LogFn>): void { this.logger.debug(...args); }
  trace(...args: Parameters<LogFn>): void { this.logger.trace(...args); }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

export const lazyChildLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) =>
  new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger;

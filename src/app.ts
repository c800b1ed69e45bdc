import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import type { Sql } from './db/client.js';
import { ReadRouter } from './db/read-router.js';
import { KeyVerifier } from './auth/key-verifier.js';
import { registerErrorHandling } from './http/error-handler.js';
import { validatorCompiler } from './http/validator.js';
import { lazyChildLogger, registerRequestLog } from './http/request-log.js';
import { registerResponseHeaders } from './http/response-headers.js';
import { registerRoutePattern } from './http/route-pattern.js';
import { registerOpenApi } from './http/openapi.js';
import { registerDocs } from './http/docs.js';
import { healthRoutes } from './http/health.js';
import { registerMetrics } from './http/metrics.js';
import { registerRateLimit } from './http/rate-limit.js';
import { registerCors } from './http/cors.js';
import { registerShutdownGuard } from './http/shutdown-guard.js';
import { sharedSchemas } from './users/schemas.js';
import { userRoutes } from './users/routes.js';
import { PageCache } from './users/page-cache.js';

export interface AppDeps {
  config: Config;
  /** Primary pool: writes, and reads when no replica is configured. */
  sql: Sql;
  /** Where reads run (replicas, see src/db/read-router.ts); defaults to `sql` alone. */
  reads?: ReadRouter;
  logger?: FastifyServerOptions['logger'] | false;
  loggerInstance?: FastifyServerOptions['loggerInstance'];
}

export interface App extends FastifyInstance {
  verifier: KeyVerifier;
}

// Also what keeps request ids plain in the request log line (src/http/request-log.ts writes them unquoted).
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP application. It never listens: src/server.ts does, tests use inject(). */
export async function buildApp(deps: AppDeps): Promise<App> {
  const { config } = deps;
  const app = Fastify({
    ...(deps.loggerInstance ? { loggerInstance: deps.loggerInstance } : { logger: deps.logger ?? { level: config.logLevel } }),
    // Our own one line per request (src/http/request-log.ts) replaces Fastify's two.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    childLoggerFactory: lazyChildLogger,
    // maxParamLength: a client_user_id may be 255 characters, each up to 12 once percent-encoded
    // (Fastify's default of 100 answered 414 to valid long ids).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 255 * 12 },
    bodyLimit: 16 * 1024,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionTimeout: config.requestTimeoutMs,
    // headersTimeout here (not only in server.ts) so that every listening app has it; Node checks
    // the header and request timeouts every connectionsCheckingInterval (30 s by default: too coarse).
    http: { maxHeaderSize: config.maxHeaderBytes, headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs) },
    return503OnClosing: false,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    },
  }) as unknown as App;
  app.setValidatorCompiler(validatorCompiler);
  for (const schema of sharedSchemas) app.addSchema(schema);

  const verifier = new KeyVerifier(deps.sql, config.keyCacheTtlMs);
  app.decorate('verifier', verifier);
  app.decorateRequest('caller', null);

  registerRoutePattern(app);
  registerErrorHandling(app);
  registerResponseHeaders(app);
  registerRequestLog(app);
  const pages = new PageCache(config.pageCacheBytes);
  registerMetrics(app, { sql: deps.sql, verifier, pages, poolMax: config.dbPoolMax, serveOnAppPort: config.metricsPort === undefined });
  // Root-level onRequest hooks, so they run before the users scope's authentication hook.
  registerShutdownGuard(app);
  await registerCors(app, config.corsOrigins);
  const limitTeam = await registerRateLimit(app, config);
  // Before any route: swagger learns the routes as they are added.
  await registerOpenApi(app);
  await registerDocs(app);
  // Outside the users scope, so without a key.
  await app.register(healthRoutes, { sql: deps.sql });

  await app.register(userRoutes, { reads: deps.reads ?? new ReadRouter(deps.sql), write: deps.sql, verifier, limitTeam, pages });
  return app;
}

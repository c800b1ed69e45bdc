import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import type { Sql } from './db/client.js';
import type { FreezeGuard } from './db/freeze-guard.js';
import { ReadRouter } from './db/read-router.js';
import { KeyVerifier, ManagementKeyVerifier } from './auth/key-verifier.js';
import { EdgeAnswers } from './http/edge-answers.js';
import { registerErrorHandling } from './http/error-handler.js';
import { registerJsonBody } from './http/json-body.js';
import { acceptEveryMethod } from './http/methods.js';
import { validatorCompiler } from './http/validator.js';
import { lazyChildLogger } from './http/fast-path/lazy-child-logger.js';
import { requestIdFor } from './http/fast-path/request-id.js';
import { registerRequestLog } from './http/fast-path/request-log-line.js';
import { registerRoutePattern } from './http/fast-path/route-pattern.js';
import { registerResponseHeaders } from './http/response-headers.js';
import { registerOpenApi } from './http/openapi.js';
import { mergeExamples } from './http/openapi-post.js';
import { registerDocs } from './http/docs.js';
import { healthRoutes } from './http/health.js';
import { registerMetrics } from './http/metrics.js';
import { registerRateLimit } from './http/rate-limit.js';
import { registerCors } from './http/cors.js';
import { registerShutdownGuard } from './http/shutdown-guard.js';
import { managementExamples } from './management/openapi-examples.js';
import { managementRoutes } from './management/routes.js';
import { managementSchemas } from './management/schemas.js';
import { userExamples } from './users/openapi-examples.js';
import { UserReads } from './users/reads.js';
import { userRoutes } from './users/routes.js';
import { userSchemas } from './users/schemas.js';

export interface AppDeps {
  config: Config;
  /** Primary pool: writes, and reads when no replica is configured. */
  sql: Sql;
  /** Where reads run (replicas, see src/db/read-router.ts); defaults to `sql` alone. */
  reads?: ReadRouter;
  /** The primary's freeze guard, when `sql` is behind one: its counts go on /metrics. */
  freezeGuard?: FreezeGuard | undefined;
  logger?: FastifyServerOptions['logger'] | false;
  loggerInstance?: FastifyServerOptions['loggerInstance'];
}

export interface App extends FastifyInstance {
  verifier: KeyVerifier;
  managementVerifier: ManagementKeyVerifier;
}

/**
 * Builds the HTTP application. It never listens: src/server.ts does, tests
 * use inject(). The order of the registrations below is the order of the
 * hooks on every request: shutdown guard, CORS, address limits, then (in the
 * user routes' scope) the key and the team limit, or (in the Management API's
 * scope) the management key. What is refused before any
 * hook can run (by the HTTP parser or the router) is answered in the same
 * shape by src/http/edge-answers.ts.
 */
export async function buildApp(deps: AppDeps): Promise<App> {
  const { config } = deps;
  const edge = new EdgeAnswers();
  const app = Fastify({
    ...(deps.loggerInstance ? { loggerInstance: deps.loggerInstance } : { logger: deps.logger ?? { level: config.logLevel } }),
    // Our own one line per request (src/http/fast-path/request-log-line.ts) replaces Fastify's two.
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
    genReqId: requestIdFor,
    // Whose X-Forwarded-For is believed (TRUST_PROXY): request.ip is then the client they name, for limits and the log.
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    frameworkErrors: edge.frameworkError,
    clientErrorHandler: edge.clientError,
  }) as unknown as App;
  app.server.on('checkExpectation', edge.expectationFailed);
  app.server.on('connect', edge.connect);
  acceptEveryMethod(app);
  app.setValidatorCompiler(validatorCompiler);
  registerJsonBody(app);
  for (const schema of [...userSchemas, ...managementSchemas]) app.addSchema(schema);

  const verifier = new KeyVerifier(deps.sql, config.keyCacheTtlMs);
  app.decorate('verifier', verifier);
  app.decorateRequest('caller', null);
  // Management keys are checked the same way, with a cache of their own: a revoked one is refused everywhere within KEY_CACHE_TTL_MS.
  const managementVerifier = new ManagementKeyVerifier(deps.sql, config.keyCacheTtlMs);
  app.decorate('managementVerifier', managementVerifier);
  app.decorateRequest('managementCaller', null);
  const reads = new UserReads(deps.reads ?? new ReadRouter(deps.sql), config.pageCacheBytes);

  registerRoutePattern(app);
  registerErrorHandling(app);
  registerResponseHeaders(app);
  const writeLine = registerRequestLog(app);
  registerMetrics(app, { sql: deps.sql, keys: verifier, pages: reads.pageStats, holeStarts: reads.holeStartStats, poolMax: config.dbPoolMax, freezeGuard: deps.freezeGuard });
  // Root-level onRequest hooks, so they run before the users scope's authentication hook.
  registerShutdownGuard(app);
  await registerCors(app, config.corsOrigins);
  const limits = await registerRateLimit(app, config);
  edge.attach({ writeLine, metrics: app.metrics, countAddress: limits.countAddress, log: app.log });
  // Before any route: swagger learns the routes as they are added.
  await registerOpenApi(app, { schemas: [...userSchemas, ...managementSchemas], examples: mergeExamples(userExamples, managementExamples) });
  await registerDocs(app);
  // Outside the users scope, so without a key.
  await app.register(healthRoutes, { sql: deps.sql });

  await app.register(userRoutes, { reads, write: deps.sql, verifier, limitTeam: limits.limitTeam, deletionGraceMs: config.deletionGraceMs });
  await app.register(managementRoutes, { sql: deps.sql, verifier: managementVerifier, config });
  return app;
}

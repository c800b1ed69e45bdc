import type { FastifyInstance } from 'fastify';
import swaggerUi from '@fastify/swagger-ui';

/**
 * Only the service's own origin may be reached from the docs page: every
 * script, style and image comes from @fastify/swagger-ui's package, so the
 * page works without internet, and the browser refuses any CDN by policy.
 * Swagger UI sets inline style attributes, hence 'unsafe-inline' for styles.
 */
const DOCS_CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
  + "connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'self'; frame-ancestors 'self'";

/** The interactive API reference at /docs (Swagger UI over the OpenAPI document). */
export async function registerDocs(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: DOCS_CSP,
    uiConfig: {
      // Never call validator.swagger.io: no internet needed, nothing sent out.
      validatorUrl: null,
      persistAuthorization: false,
      displayRequestDuration: true,
      tryItOutEnabled: true,
    },
    theme: { title: 'Health data service API' },
  });
}

import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { connect } from '../db/client.js';

/**
 * The OpenAPI document exactly as /openapi.json serves it, built without a
 * database: the pool below is never queried, so it never connects. The
 * configuration is the default one, so the document does not depend on the
 * environment of whoever runs `npm run openapi`.
 */
export async function buildOpenApiDocument(): Promise<unknown> {
  const sql = connect('postgres://unused@127.0.0.1:1/unused', { max: 1 });
  const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent' }), sql, logger: false });
  try {
    await app.ready();
    return app.swagger();
  } finally {
    await app.close();
    await sql.end({ timeout: 0 });
  }
}

/** The committed file's text: stable key order from the routes, two-space indent, final newline. */
export function openApiText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

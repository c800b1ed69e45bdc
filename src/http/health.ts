import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Sql } from '../db/client.js';
import { migrationsCurrent } from '../db/migrate.js';
import { unavailable } from '../errors/catalogue.js';
import { ErrorMessage } from '../errors/schemas.js';

const Status = Type.Object({ status: Type.String() });
const PROBE = { tags: ['operations'], security: [] };

/**
 * Probes for orchestrators, outside the users scope so they need no key.
 * /healthz: the process answers (no database: a database outage must not get
 * healthy processes restarted). /readyz: this instance can serve traffic:
 * the database answers and its schema is current. While shutting down, the
 * shutdown guard (src/http/shutdown-guard.ts) answers 503 before any route.
 */
export async function healthRoutes(app: FastifyInstance, deps: { sql: Sql }): Promise<void> {
  app.get('/healthz', {
    schema: { ...PROBE, summary: 'Liveness', operationId: 'healthz', response: { 200: Status } },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    schema: {
      ...PROBE, summary: 'Readiness', operationId: 'readyz',
      description: 'Ready when the database answers and every migration is applied.',
      response: { 200: Status, 503: Type.Ref(ErrorMessage, { description: 'Database unreachable, migrations pending, or shutting down' }) },
    },
  }, async (request) => {
    const problem = await databaseProblem(deps.sql);
    if (problem) {
      request.log.warn({ reason: problem }, 'not ready');
      throw unavailable();
    }
    return { status: 'ready' };
  });
}

async function databaseProblem(sql: Sql): Promise<string | undefined> {
  try {
    await sql`SELECT 1`;
  } catch {
    return 'database unreachable';
  }
  return (await migrationsCurrent(sql)) ? undefined : 'migrations pending';
}

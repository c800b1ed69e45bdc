import fs from 'node:fs';
import type { FastifyInstance, FastifySchema } from 'fastify';
import swagger from '@fastify/swagger';
import { API_KEY_HEADER, MANAGEMENT_KEY_HEADER, UPSTREAM_API_KEY_HEADER } from '../auth/authenticate.js';
import { Type } from '@sinclair/typebox';
import { ErrorMessage } from '../errors/schemas.js';
import { withExamples, withRefSiblings, type OpenApiDocument, type OpenApiExamples } from './openapi-post.js';

// package.json sits two levels up from both src/http and dist/http.
const VERSION = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Registers @fastify/swagger so that the OpenAPI 3.1 document is built from
 * the very schemas that validate requests. Must be registered before any
 * route: it learns the routes through the onRoute hook.
 * Documentation only: route serialisation is untouched (user routes send JSON
 * text built by PostgreSQL anyway). `content` comes from the resources: the
 * schemas their routes reference by $id, and the examples of their bodies.
 */
export async function registerOpenApi(app: FastifyInstance, content: { schemas: readonly object[]; examples: OpenApiExamples }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Health data service',
        version: VERSION,
        description: 'Self-hostable health-data aggregation service. Every `/v2/user` route needs a team API key '
          + `in the \`${API_KEY_HEADER}\` header (or the upstream's \`${UPSTREAM_API_KEY_HEADER}\`; ours wins when both are sent). `
          + `The Management API (\`/v1/org/{org_id}/…\`: teams, team keys, webhook endpoints and their messages) needs a management key in the \`${MANAGEMENT_KEY_HEADER}\` header `
          + 'instead; neither kind of key works on the other\'s routes. '
          + 'Error bodies follow the FastAPI convention: `{"detail": ...}`.',
      },
      tags: [
        { name: 'user', description: "The team's end users" },
        { name: 'link', description: "Connecting a user to a source: the upstream's demo connection" },
        { name: 'management', description: 'The Management API: teams, team API keys, webhook endpoints and their messages, with a management key (issued with `hds management-keys create`)' },
        { name: 'operations', description: 'Liveness and readiness probes (no key)' },
      ],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: API_KEY_HEADER, description: 'Team API key issued with `hds keys create`' },
          upstreamApiKey: {
            type: 'apiKey', in: 'header', name: UPSTREAM_API_KEY_HEADER,
            description: 'The same key in the upstream\'s header, as its SDK sends it; x-service-api-key wins when both are sent',
          },
          managementKey: {
            type: 'apiKey', in: 'header', name: MANAGEMENT_KEY_HEADER,
            description: 'Management key issued with `hds management-keys create` (Management API routes only; a team key is refused there)',
          },
        },
      },
    },
    // Components are named after the schemas' $id (User, UserList…), not def-N.
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url }) => ({ schema: documented(schema), url }),
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      withExamples(withRefSiblings(document.openapiObject as OpenApiDocument, content.schemas), content.examples);
      return document.openapiObject;
    },
  });
  app.get('/openapi.json', { schema: { hide: true } as FastifySchema }, async () => app.swagger());
}

const RESPONSE_HEADERS: Record<string, Record<string, { description: string; type: string }>> = {
  401: { 'www-authenticate': { description: 'How to authenticate', type: 'string' } },
  429: { 'retry-after': { description: 'Seconds to wait', type: 'integer' } },
  503: { 'retry-after': { description: 'Seconds to wait', type: 'integer' } },
};

/**
 * What the document adds to a route's own schema: every operation can answer
 * 500; error responses name the headers they carry. (The key header is
 * described once, by the security scheme.)
 */
function documented(schema: FastifySchema | undefined): FastifySchema {
  if (!schema) return {};
  const { response, ...rest } = schema as FastifySchema & { response?: Record<string, object> };
  const out: FastifySchema & Record<string, unknown> = { ...rest };
  if (rest.querystring) out.querystring = defaultsNotRequired(rest.querystring);
  if (response) {
    const all: Record<string, object> = { ...response, 500: Type.Ref(ErrorMessage, { description: 'Bug; nothing internal is leaked' }) };
    out.response = Object.fromEntries(Object.entries(all).map(([status, body]) => {
      // A $ref response takes its description from beside the $ref; any other from swagger's own keyword.
      const described = status !== '200' || 'description' in body ? body
        : '$ref' in body ? { ...body, description: 'Successful Response' } : { ...body, 'x-response-description': 'Successful Response' };
      return [status, RESPONSE_HEADERS[status] ? { ...described, headers: RESPONSE_HEADERS[status] } : described];
    }));
  }
  return out;
}

/** A query parameter with a default may be left out: the validator fills it in before checking `required`. */
function defaultsNotRequired(querystring: unknown): unknown {
  const q = querystring as { required?: string[]; properties?: Record<string, { default?: unknown }> };
  if (!q.required || !q.properties) return querystring;
  return { ...q, required: q.required.filter((name) => q.properties?.[name]?.default === undefined) };
}

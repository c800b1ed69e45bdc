import { CREATE_USER_EXAMPLE, ERROR_MESSAGE_BY_STATUS, EXAMPLE_BY_REF } from './openapi-examples.js';

interface Media { schema?: { $ref?: string }; example?: unknown }
interface Operation {
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, { content?: Record<string, Media> }>;
}
export interface OpenApiDocument {
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, { properties?: Record<string, Record<string, unknown>> }> };
}

const COMPONENT_PREFIX = '#/components/schemas/';

/**
 * @fastify/swagger replaces a property `{$ref, deprecated, description}` by a
 * bare `$ref`, losing the keywords beside it (OpenAPI 3.1 allows them). This
 * puts them back from the source schemas: that is how `provider` is marked
 * deprecated where the schema says so.
 */
export function withRefSiblings(doc: OpenApiDocument, sources: readonly object[]): OpenApiDocument {
  for (const source of sources as { $id?: string; properties?: Record<string, Record<string, unknown>> }[]) {
    const target = source.$id ? doc.components?.schemas?.[source.$id] : undefined;
    if (!target?.properties || !source.properties) continue;
    for (const [name, property] of Object.entries(source.properties)) {
      const { $ref, ...siblings } = property;
      const out = target.properties[name];
      if (typeof $ref === 'string' && out && Object.keys(siblings).length > 0) target.properties[name] = { ...out, ...siblings };
    }
  }
  return doc;
}

/** Adds a media-type example to each response whose schema has a known example, and to JSON request bodies. */
export function withExamples(doc: OpenApiDocument): OpenApiDocument {
  for (const methods of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(methods)) {
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        if (media.example === undefined) media.example = CREATE_USER_EXAMPLE;
      }
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        for (const media of Object.values(response.content ?? {})) {
          const ref = media.schema?.$ref?.startsWith(COMPONENT_PREFIX) ? media.schema.$ref.slice(COMPONENT_PREFIX.length) : undefined;
          const example = ref === 'ErrorMessage'
            ? ERROR_MESSAGE_BY_STATUS[status] && { detail: ERROR_MESSAGE_BY_STATUS[status] }
            : ref && EXAMPLE_BY_REF[ref];
          if (example && media.example === undefined) media.example = example;
        }
      }
    }
  }
  return doc;
}

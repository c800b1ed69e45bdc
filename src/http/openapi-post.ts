interface Media { schema?: { $ref?: string }; example?: unknown }
interface Operation {
  operationId?: string;
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, { content?: Record<string, Media> }>;
}
export interface OpenApiDocument {
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, { properties?: Record<string, Record<string, unknown>> }> };
}

/** What the document's examples are made of (the resources provide them). */
export interface OpenApiExamples {
  /** A response example for each component a response may reference, by the component's name. */
  byRef: Record<string, unknown>;
  /** The `detail` of an ErrorMessage response, by `operationId:status` where an operation words it its own way, else by status. */
  errorMessageByStatus: Record<string, string>;
  /** The example of JSON request bodies. */
  requestBody: unknown;
  /** The example of an operation's JSON request body, by operationId, where it is not `requestBody`. */
  requestBodyByOperation?: Record<string, unknown>;
}

/** The examples of several resources as one: `first`'s request body is the default; the others name their operations. */
export function mergeExamples(first: OpenApiExamples, ...others: OpenApiExamples[]): OpenApiExamples {
  return others.reduce((all, more) => ({
    byRef: { ...all.byRef, ...more.byRef },
    errorMessageByStatus: { ...all.errorMessageByStatus, ...more.errorMessageByStatus },
    requestBody: all.requestBody,
    requestBodyByOperation: { ...all.requestBodyByOperation, ...more.requestBodyByOperation },
  }), first);
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
export function withExamples(doc: OpenApiDocument, examples: OpenApiExamples): OpenApiDocument {
  for (const methods of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(methods)) {
      const requestExample = (operation.operationId && examples.requestBodyByOperation?.[operation.operationId]) ?? examples.requestBody;
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        if (media.example === undefined) media.example = requestExample;
      }
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        for (const media of Object.values(response.content ?? {})) {
          const ref = media.schema?.$ref?.startsWith(COMPONENT_PREFIX) ? media.schema.$ref.slice(COMPONENT_PREFIX.length) : undefined;
          const message = examples.errorMessageByStatus[`${operation.operationId}:${status}`] ?? examples.errorMessageByStatus[status];
          const example = ref === 'ErrorMessage' ? message && { detail: message } : ref && examples.byRef[ref];
          if (example && media.example === undefined) media.example = example;
        }
      }
    }
  }
  return doc;
}

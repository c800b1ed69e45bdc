/**
 * The Management API in the OpenAPI document: under its own tag, with its
 * own security scheme, every route of section 11 (but messages and recover,
 * which come with the events) with the statuses it answers and examples.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { buildOpenApiDocument } from '../src/cli/openapi-document.js';

type Doc = Record<string, any>;

describe('OpenAPI document: the Management API', () => {
  let built: Doc;
  before(async () => {
    built = (await buildOpenApiDocument()) as Doc;
  });

  it('has its own tag and security scheme, beside the team key\'s', () => {
    assert.ok(built.tags.some((t: { name: string }) => t.name === 'management'));
    assert.deepEqual(built.components.securitySchemes.managementKey, {
      type: 'apiKey', in: 'header', name: 'x-management-key', description: built.components.securitySchemes.managementKey.description,
    });
    assert.equal(built.components.securitySchemes.apiKey.name, 'x-service-api-key');
  });

  it('documents every route with its statuses, the management key, and examples of its own', () => {
    const org = '/v1/org/{org_id}';
    const webhook = `${org}/team/{team_id}/{environment}/webhook/{webhook_id}`;
    const common = ['401', '404', '422', '429', '500', '503'];
    const body = ['413', '415'];
    const operations: [string, string, string[]][] = [
      [org, 'get', ['200', ...common]],
      [`${org}/team`, 'get', ['200', ...common]],
      [`${org}/team`, 'post', ['200', ...body, ...common]],
      [`${org}/team/{team_id}`, 'get', ['200', ...common]],
      [`${org}/team/{team_id}`, 'patch', ['200', ...body, ...common]],
      [`${org}/team/{team_id}`, 'delete', ['200', '409', ...common]],
      [`${org}/team_api_keys/{env}/{region}`, 'get', ['200', ...common]],
      [`${org}/team_api_keys/{env}/{region}`, 'post', ['200', ...body, ...common]],
      [`${org}/team_api_keys/{env}/{region}`, 'delete', ['200', ...common]],
      [`${org}/team/{team_id}/{environment}/webhook`, 'get', ['200', ...common]],
      [`${org}/team/{team_id}/{environment}/webhook`, 'post', ['200', ...body, ...common]],
      [webhook, 'get', ['200', ...common]],
      [webhook, 'patch', ['200', ...body, ...common]],
      [webhook, 'delete', ['204', ...common]],
      [`${webhook}/headers`, 'get', ['200', ...common]],
      [`${webhook}/headers`, 'put', ['204', ...body, ...common]],
      [`${webhook}/secret`, 'get', ['200', ...common]],
      [`${webhook}/secret/rotate`, 'post', ['204', ...body, ...common]],
      [`${webhook}/messages`, 'get', ['200', ...common]],
      [`${webhook}/recover`, 'post', ['202', ...body, ...common]],
    ];
    for (const [url, method, statuses] of operations) {
      const op = built.paths[url]?.[method];
      assert.ok(op, `${method.toUpperCase()} ${url} is documented`);
      assert.deepEqual(op.tags, ['management'], `${method} ${url}`);
      assert.deepEqual(op.security, [{ managementKey: [] }], `${method} ${url} needs the management key`);
      assert.deepEqual(Object.keys(op.responses).sort(), [...statuses].sort(), `${method} ${url} statuses`);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (status === '204') assert.equal(response.content, undefined);
        else assert.ok(response.content?.['application/json']?.example !== undefined, `${method} ${url} ${status} has an example`);
      }
      const example = op.requestBody?.content?.['application/json']?.example;
      if (op.requestBody) assert.ok(example && !('client_user_id' in example), `${method} ${url}: a request example of its own`);
    }
    const mgmtPaths = Object.keys(built.paths).filter((url) => url.startsWith('/v1/org/'));
    assert.deepEqual(mgmtPaths.sort(), [...new Set(operations.map(([url]) => url))].sort());
    assert.equal(built.paths[`${org}/team/{team_id}`].get.responses['404'].content['application/json'].example.detail, 'Team not found');
    assert.equal(built.paths[webhook].get.responses['404'].content['application/json'].example.detail, 'Webhook endpoint not found');
    const params = built.paths[`${org}/team_api_keys/{env}/{region}`].get.parameters as { name: string; schema: { enum?: string[] } }[];
    assert.deepEqual(params.find((p) => p.name === 'env')!.schema.enum, ['production', 'sandbox']);
    assert.deepEqual(params.find((p) => p.name === 'region')!.schema.enum, ['us', 'eu']);
  });
});

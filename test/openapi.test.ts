import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { validate, compileErrors } from '@readme/openapi-parser';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { buildOpenApiDocument, openApiText } from '../src/cli/openapi-document.js';
import { findUserDocBatched } from '../src/users/batched-lookups.js';
import { ROOT, teamWithUsers, testApp, testSql } from './helpers.js';

type Doc = Record<string, any>;

describe('OpenAPI document', () => {
  let sql: Sql;
  let app: App;
  let built: Doc;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    built = (await buildOpenApiDocument()) as Doc;
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('committed openapi.json is what `npm run openapi` writes now', () => {
    const committed = fs.readFileSync(path.join(ROOT, 'openapi.json'), 'utf8');
    assert.ok(committed === openApiText(built), 'openapi.json is stale: run `npm run openapi` and commit the result');
  });

  it('is served at /openapi.json without a key, equal to the committed one', async () => {
    const res = await app.inject({ url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(res.json(), JSON.parse(openApiText(built)));
  });

  it('passes @readme/openapi-parser validation with no errors or warnings', async () => {
    // validate() dereferences in place: give it a copy.
    const result = await validate(structuredClone(built) as any);
    assert.ok(result.valid, result.valid ? '' : compileErrors(result));
    assert.deepEqual(result.warnings, []);
    assert.equal(result.specification, 'OpenAPI');
    assert.equal(built.openapi, '3.1.0');
  });

  it('describes every contract route with its statuses, the key scheme and examples', () => {
    assert.deepEqual(built.components.securitySchemes.apiKey, {
      type: 'apiKey', in: 'header', name: 'x-service-api-key', description: built.components.securitySchemes.apiKey.description,
    });
    const common = ['401', '422', '429', '500', '503'];
    const operations: [string, string, string[]][] = [
      ['/v2/user/', 'get', ['200', ...common]],
      ['/v2/user/', 'post', ['200', '400', '413', '415', ...common]],
      ['/v2/user/{user_id}', 'get', ['200', '404', ...common]],
      ['/v2/user/{user_id}', 'patch', ['204', '400', '404', '409', '413', '415', ...common]],
      ['/v2/user/{user_id}', 'delete', ['200', '404', ...common]],
      ['/v2/user/resolve/{client_user_id}', 'get', ['200', '404', ...common]],
      ['/v2/user/undo_delete', 'post', ['200', '404', '409', ...common]],
      ['/v2/user/providers/{user_id}', 'get', ['200', '404', ...common]],
      ['/v2/user/{user_id}/{provider}', 'delete', ['200', '404', ...common]],
      ['/v2/user/metrics', 'get', ['200', ...common]],
      ['/v2/team/users/search', 'get', ['200', ...common]],
      ['/v2/link/connect/demo', 'post', ['200', '404', '413', '415', ...common]],
    ];
    for (const [url, method, statuses] of operations) {
      const op = built.paths[url]?.[method];
      assert.ok(op, `${method.toUpperCase()} ${url} is documented`);
      // Either header carries the key.
      assert.deepEqual(op.security, [{ apiKey: [] }, { upstreamApiKey: [] }], `${url} requires the key`);
      assert.deepEqual(Object.keys(op.responses).sort(), [...statuses].sort(), `${method} ${url} statuses`);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (status === '204') assert.equal(response.content, undefined, `${method} ${url} 204 has no body`);
        else assert.ok(response.content?.['application/json']?.schema, `${method} ${url} ${status} has a body schema`);
      }
      // The key is the security schemes' business, not a parameter.
      assert.ok(!(op.parameters ?? []).some((p: any) => p.in === 'header' && /api-key/.test(p.name)));
      assert.ok(op.responses['401'].content['application/json'].example, `${url} 401 has an example`);
    }
    // A 404's example is the route's own wording.
    const example404 = (url: string, method: string) => built.paths[url][method].responses['404'].content['application/json'].example.detail;
    assert.equal(example404('/v2/user/{user_id}', 'get'), 'Not found');
    assert.equal(example404('/v2/user/resolve/{client_user_id}', 'get'), 'User not found');
    assert.equal(example404('/v2/user/{user_id}', 'delete'), 'The user does not or no longer exists in this team');
    const single = built.paths['/v2/user/{user_id}'].get.responses['200'].content['application/json'];
    assert.deepEqual(single.schema, { $ref: '#/components/schemas/User' });
    assert.equal(single.example.user_id.length, 36);
    assert.ok(built.paths['/v2/user/'].post.requestBody.content['application/json'].example.client_user_id);
    // Probes are open; /metrics, /docs and /openapi.json are not API operations.
    assert.deepEqual(built.paths['/healthz'].get.security, []);
    assert.deepEqual(built.paths['/readyz'].get.security, []);
    // The Management API's paths (/v1/org/…) are checked by test/management-openapi.test.ts.
    const teamPaths = Object.keys(built.paths).filter((url) => !url.startsWith('/v1/org/'));
    assert.deepEqual(teamPaths.sort(), ['/healthz', '/readyz', ...new Set(operations.map(([url]) => url))].sort());
  });

  it('marks provider deprecated and source not', () => {
    const { properties } = built.components.schemas.ConnectedSource;
    assert.equal(properties.provider.deprecated, true);
    assert.equal(properties.provider.$ref, '#/components/schemas/Source');
    assert.equal(properties.source.deprecated, undefined);
  });

  it('documents list parameters with defaults as optional', () => {
    const params = built.paths['/v2/user/'].get.parameters as any[];
    const byName = Object.fromEntries(params.map((p) => [p.name, p]));
    assert.equal(byName.offset.required, false);
    assert.equal(byName.limit.schema.default, 100);
    assert.equal(byName.limit.schema.maximum, 500);
  });

  it('does not change how user routes answer: the body is the JSON text PostgreSQL built', async () => {
    const team = await teamWithUsers(sql, 2);
    const id = team.users[0]!.user_id as string;
    const res = await app.inject({ url: `/v2/user/${id}`, headers: { 'x-service-api-key': team.key } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, (await findUserDocBatched(sql, team.teamId, id))!.doc.toString());
  });
});

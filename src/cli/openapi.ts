/**
 * `npm run openapi`: writes openapi.json at the repository root from the
 * route schemas. test/openapi.test.ts fails when the committed file is stale.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument, openApiText } from './openapi-document.js';

const target = fileURLToPath(new URL('../../openapi.json', import.meta.url));
fs.writeFileSync(target, openApiText(await buildOpenApiDocument()));
process.stderr.write(`wrote ${target}\n`);

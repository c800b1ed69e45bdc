/**
 * The least a Node.js process pays for a list page with this project's
 * driver: a `node:http` server (no Fastify, no key, no rate limit, no log,
 * no audit) that answers `GET /?offset=N&limit=M` for one team with the
 * built service's own findUserPage (the page statement, the rows copied into
 * one buffer as they arrive) and writes the body. What the service pays
 * beyond it is its own; what it pays beyond PostgreSQL is the runtime's,
 * the driver's and the kernel's. A tool for measuring by hand, not a
 * scenario (bench/README.md, "Finding where time goes").
 *
 *   DATABASE_URL=… TEAM_ID=… PORT=8199 node --import tsx bench/bare-page-server.ts
 */
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

type FindUserPage = (sql: unknown, teamId: string, offset: number, limit: number, buffers?: unknown) => Promise<{ body: Buffer; lease?: Buffer } | undefined>;

const root = path.resolve(import.meta.dirname, '..');
const load = async <T>(file: string) => (await import(pathToFileURL(path.join(root, 'dist', file)).href)) as T;
const { findUserPage } = await load<{ findUserPage: FindUserPage }>('users/queries.js');
const { connect } = await load<{ connect: (url: string, options: { max: number }) => unknown }>('db/client.js');
const { AnswerBuffers } = await load<{ AnswerBuffers: new (bytes: number) => { giveBack(buffer: Buffer): void } }>('http/fast-path/answer-buffers.js');

const url = process.env.DATABASE_URL;
const teamId = process.env.TEAM_ID;
if (!url || !teamId) throw new Error('set DATABASE_URL and TEAM_ID');
// The service's pool size (DB_POOL_MAX's default) and page buffers.
const sql = connect(url, { max: 10 });
const buffers = new AnswerBuffers(16 * 1024 * 1024);

http.createServer((request, response) => {
  const query = new URL(request.url ?? '/', 'http://bare').searchParams;
  findUserPage(sql, teamId, Number(query.get('offset') ?? 0), Number(query.get('limit') ?? 100), buffers).then((page) => {
    if (!page) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': page.body.length });
    response.end(page.body, () => {
      if (page.lease) buffers.giveBack(page.lease);
    });
  }, (err: unknown) => {
    response.writeHead(500).end(String(err));
  });
}).listen(Number(process.env.PORT ?? 8199), '127.0.0.1');

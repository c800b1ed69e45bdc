/**
 * Our shape at every layer: what the HTTP parser and the router refuse, before
 * any route's hook runs, is answered like every other error (`{"detail": …}`,
 * x-request-id, nosniff, no-store), logged as one request line, counted in the
 * metrics and against the client's budget; hostile input never reaches
 * PostgreSQL and never answers 5xx. On a listening app: the parser's
 * refusals do not happen under inject().
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { MAX_JSON_DEPTH } from '../src/http/json-body.js';
import { loggedApp, teamWithUsers, testSql, until, type TeamWithUsers } from './helpers.js';

interface RawAnswer { status: number; headers: Record<string, string>; body: string; text: string }

/** Writes `request` as it is on a new connection and reads until the server closes it or `untilText` is seen. */
function raw(port: number, request: string | Buffer, { waitMs = 5000 } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n'), text });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (d) => { text += d; });
    socket.on('end', finish);
    socket.on('error', (err) => (text ? finish() : reject(err)));
    socket.on('connect', () => socket.write(request));
  });
}

describe('answers given before any route', () => {
  let sql: Sql;
  let app: App;
  let lines: () => Record<string, any>[];
  let team: TeamWithUsers;
  let port: number;

  before(async () => {
    sql = testSql();
    ({ app, lines } = await loggedApp(sql, { HEADERS_TIMEOUT_MS: '300', MAX_HEADER_BYTES: '8192' }));
    team = await teamWithUsers(sql, 3);
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as net.AddressInfo).port;
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  /** Our shape: the status, a JSON `detail`, and the headers of every answer; its line in the log. */
  function assertOurs(answer: RawAnswer, status: number, what: string): void {
    assert.equal(answer.status, status, `${what}: ${answer.text.slice(0, 300)}`);
    assert.match(answer.headers['content-type'] ?? '', /^application\/json/, what);
    assert.equal(answer.headers['x-content-type-options'], 'nosniff', what);
    assert.equal(answer.headers['cache-control'], 'no-store', what);
    const id = answer.headers['x-request-id'];
    assert.ok(id, `${what}: x-request-id`);
    const body = JSON.parse(answer.body) as { detail: unknown };
    assert.deepEqual(Object.keys(body), ['detail'], what);
    assert.ok(!answer.body.includes('statusCode') && !answer.body.includes('FST_'), `${what}: nothing of Fastify's shape`);
    const line = lines().find((l) => l.msg === 'request' && l.request_id === id);
    assert.ok(line, `${what}: one request line in the log`);
    assert.equal(line.status, status, what);
    assert.equal(line.ip, '127.0.0.1', what);
  }

  const key = () => `x-service-api-key: ${team.key}\r\n`;

  it('the router: a malformed URL is a 400, a path parameter over its length a 414 that does not echo it', async () => {
    assertOurs(await raw(port, `GET /v2/user/resolve/%FF HTTP/1.1\r\nHost: x\r\n${key()}Connection: close\r\n\r\n`), 400, 'bad encoding');
    const long = await raw(port, `GET /v2/user/resolve/${'x'.repeat(3100)} HTTP/1.1\r\nHost: x\r\n${key()}Connection: close\r\n\r\n`);
    assertOurs(long, 414, 'long parameter');
    assert.ok(!long.body.includes('xxxx'), 'the path is not echoed back');
  });

  it('the parser: smuggling probes, a header too large, slow headers, a failed Expect', async () => {
    const smuggle = `POST /v2/user/ HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v2/user/ HTTP/1.1\r\n\r\n`;
    assertOurs(await raw(port, smuggle), 400, 'Content-Length with Transfer-Encoding');
    assertOurs(await raw(port, `GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n`), 400, 'a header name with a space');
    assertOurs(await raw(port, `GET /v2/user/ HTTP/1.1\r\nHost: x\r\nx-big: ${'y'.repeat(20_000)}\r\n\r\n`), 431, '20 KB header');
    assertOurs(await raw(port, `GET /v2/user/ HTTP/1.1\r\nHost: x\r\n`), 408, 'headers never finished');
    assertOurs(await raw(port, `GET /v2/user/ HTTP/1.1\r\nHost: x\r\n${key()}Expect: 999-foo\r\n\r\n`), 417, 'Expect: 999-foo');
  });

  it('any method but the route\'s is a 405 with Allow, CONNECT too', async () => {
    for (const method of ['TRACE', 'PROPFIND', 'SEARCH', 'MKCOL', 'QUERY', 'PURGE', 'LOCK']) {
      const answer = await raw(port, `${method} /v2/user/${team.users[0]!.user_id} HTTP/1.1\r\nHost: x\r\n${key()}Connection: close\r\n\r\n`);
      assertOurs(answer, 405, method);
      assert.equal(answer.headers.allow, 'GET, HEAD, PATCH, DELETE', method);
    }
    assertOurs(await raw(port, `CONNECT 127.0.0.1:5432 HTTP/1.1\r\nHost: x\r\n\r\n`), 405, 'CONNECT');
    // An unknown path stays a 404, whatever the method.
    assertOurs(await raw(port, `PROPFIND /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 404, 'PROPFIND on an unknown path');
  });

  it('counts each refusal in the metrics, by its status', async () => {
    const count = async () => (await app.metrics.render()).split('\n')
      .filter((l) => l.startsWith('http_requests_total{') && l.includes('status="431"'))
      .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    const before = await count();
    await raw(port, `GET / HTTP/1.1\r\nHost: x\r\nx-big: ${'y'.repeat(20_000)}\r\n\r\n`);
    assert.equal(await count(), before + 1);
  });

  it('refuses JSON nested deeper than the limit at any depth up to the body limit, as a 422', async () => {
    for (const depth of [MAX_JSON_DEPTH + 1, 1000, 8000]) {
      const body = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const answer = await raw(port, `POST /v2/user/ HTTP/1.1\r\nHost: x\r\n${key()}content-type: application/json\r\ncontent-length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      assertOurs(answer, 422, `depth ${depth}`);
      assert.equal(JSON.parse(answer.body).detail[0].type, 'json_invalid');
    }
    // Brackets inside strings do not count.
    const inText = JSON.stringify({ client_user_id: `nested-${'['.repeat(200)}`.slice(0, 200) });
    const ok = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': team.key, 'content-type': 'application/json' }, payload: inText });
    assert.equal(ok.statusCode, 200, ok.body);
  });

  it('refuses a NUL or a lone surrogate before PostgreSQL sees it, in the path, the query and the body', async () => {
    type Request = { method?: 'GET' | 'POST' | 'PATCH'; url: string; payload?: string; headers?: Record<string, string> };
    const cases: [string, Request, string[]][] = [
      ['NUL in the resolve path', { url: '/v2/user/resolve/a%00b' }, ['path', 'client_user_id']],
      ['NUL in a search', { url: '/v2/team/users/search?query_id=a%00b' }, ['query', 'query_id']],
      ['lone surrogate in a create', { method: 'POST', url: '/v2/user/', payload: '{"client_user_id":"adv_\\ud800_x"}', headers: { 'content-type': 'application/json' } }, ['body', 'client_user_id']],
      ['NUL in a patch', { method: 'PATCH', url: `/v2/user/${team.users[0]!.user_id}`, payload: '{"fallback_time_zone":"Europe/\\u0000London"}', headers: { 'content-type': 'application/json' } }, ['body', 'fallback_time_zone']],
      ['lone surrogate in an unknown field name', { method: 'POST', url: '/v2/user/', payload: '{"client_user_id":"ok-1","\\udc00":1}', headers: { 'content-type': 'application/json' } }, ['body', '\udc00']],
    ];
    for (const [what, request, loc] of cases) {
      const res = await app.inject({ ...request, headers: { ...request.headers, 'x-service-api-key': team.key } });
      assert.equal(res.statusCode, 422, `${what}: ${res.body}`);
      assert.deepEqual(res.json().detail.map((i: { loc: unknown }) => i.loc), [loc], what);
    }
    assert.equal(lines().filter((l) => l.level >= 50).length, 0, 'no error was logged');
  });

  it('logs a client that aborts in the middle of its body as an aborted request, not a database outage', async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /v2/user/ HTTP/1.1\r\nHost: x\r\n${key()}content-type: application/json\r\ncontent-length: 100\r\n\r\n{"client_user_id":`);
    // The server has the headers once it counts the request in flight: the hooks have run (the key was checked).
    await until('the request is in flight', 10_000, async () => app.verifier.accepted > 0);
    socket.destroy();
    await until('the abort is logged', 10_000, () => lines().some((l) => l.msg === 'request aborted by the client'));
    assert.ok(!lines().some((l) => /database/i.test(String(l.msg))), 'nothing about the database');
  });

  it('counts refusals against the client\'s budget', async () => {
    const { app: limited } = await loggedApp(sql, { RATE_LIMIT_PER_IP: '3' });
    await limited.listen({ port: 0, host: '127.0.0.1' });
    try {
      const limitedPort = (limited.server.address() as net.AddressInfo).port;
      for (let i = 0; i < 3; i++) assert.equal((await raw(limitedPort, `GET /v2/user/resolve/%FF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)).status, 400);
      const next = await raw(limitedPort, `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(next.status, 200, 'the probes are never limited');
      const limitedNow = await raw(limitedPort, `GET /v2/user/ HTTP/1.1\r\nHost: x\r\n${key()}Connection: close\r\n\r\n`);
      assert.equal(limitedNow.status, 429, 'the three refusals used the budget');
    } finally {
      await limited.close();
    }
  });
});

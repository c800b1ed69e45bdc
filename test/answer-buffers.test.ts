/**
 * Answer buffers (src/http/fast-path/answer-buffers.ts): a buffer is used
 * again only once nothing reads it. The pool on its own, then a real server
 * whose pages of 500 are pipelined to a client that does not read while
 * other clients are answered from the same pool: every byte the slow client
 * finally reads must be its own pages'.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { AnswerBuffers } from '../src/http/fast-path/answer-buffers.js';
import { testApp, teamWithUsers, testSql, until, type TeamWithUsers } from './helpers.js';

describe('answer buffers', () => {
  it('hands a buffer given back to the next taker of its size, and small sizes never come from the pool', () => {
    const buffers = new AnswerBuffers(1024 * 1024);
    assert.equal(buffers.take(100).length, 100, 'below the pooled sizes: a plain allocation');
    const first = buffers.take(40_000);
    assert.equal(first.length, 65_536, 'sizes are rounded up to a power of two');
    buffers.giveBack(first);
    assert.equal(buffers.take(33_000), first, 'the same size class is used again');
    assert.notEqual(buffers.take(33_000), first, 'a buffer is lent to one taker at a time');
  });

  it('refuses a buffer given back twice, and keeps no views nor more than its bound', () => {
    const buffers = new AnswerBuffers(100_000);
    const whole = buffers.take(65_536);
    buffers.giveBack(whole.subarray(0, 32_768));
    assert.notEqual(buffers.take(32_768).buffer, whole.buffer, 'a view of a buffer is not a buffer of the pool');
    assert.notEqual(buffers.take(65_536).buffer, whole.buffer, 'nor is the buffer it views');
    buffers.giveBack(whole);
    assert.throws(() => buffers.giveBack(whole), /given back twice/);
    assert.equal(buffers.take(65_536), whole);
    // 2 x 64 KB given back, against a bound of 100,000 bytes: only the first is kept.
    const second = buffers.take(65_536);
    buffers.giveBack(whole);
    buffers.giveBack(second);
    assert.equal(buffers.take(65_536), whole);
    assert.notEqual(buffers.take(65_536), second, 'beyond the bound, buffers are left to the garbage collector');
  });

  describe('a client that reads late gets the bytes it asked for', () => {
    let sql: Sql;
    let app: App;
    let team: TeamWithUsers;
    let port: number;

    before(async () => {
      sql = testSql();
      team = await teamWithUsers(sql, 1_100);
      app = await testApp(sql, { PAGE_CACHE_MB: '0' });
      await app.listen({ port: 0, host: '127.0.0.1' });
      port = (app.server.address() as net.AddressInfo).port;
    });
    after(async () => {
      await app.close();
      await sql.end();
    });

    const pagePath = (offset: number) => `/v2/user/?offset=${offset}&limit=500`;

    it('200 pipelined pages of 500, unread while 30 other pages are served, arrive intact', async () => {
      // More than loopback's socket buffers take (tens of MB on Linux) while the client does not read.
      const offsets = Array.from({ length: 200 }, (_, i) => (i * 37) % 600);
      const slow = net.connect({ port, host: '127.0.0.1' });
      await new Promise((resolve) => slow.once('connect', resolve));
      slow.pause();
      const slowAnswers: http.ServerResponse[] = [];
      app.server.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => {
        if (request.headers['x-slow']) slowAnswers.push(response);
      });
      slow.write(offsets.map((o) => `GET ${pagePath(o)} HTTP/1.1\r\nhost: x\r\nx-slow: 1\r\nx-vital-api-key: ${team.key}\r\n\r\n`).join(''));
      // The socket's buffers took the first answers; one is now sent but not written out (and the rest wait) before the others come.
      await until('a pipelined answer in flight', 20_000, () => slowAnswers.some((r) => r.headersSent && !r.writableFinished));
      const others = await Promise.all(Array.from({ length: 30 }, (_, i) => fetch(`http://127.0.0.1:${port}${pagePath(599 - i * 19)}`, { headers: { 'x-vital-api-key': team.key } })
        .then(async (res) => ({ status: res.status, body: await res.text() }))));
      assert.ok(others.every((o) => o.status === 200), 'the other clients were served meanwhile');

      const chunks: Buffer[] = [];
      slow.on('data', (chunk: Buffer) => chunks.push(chunk));
      slow.resume();
      const bodies = await until('every pipelined answer is read', 60_000, () => {
        const parsed = parseResponses(Buffer.concat(chunks));
        return parsed.length === offsets.length ? parsed : undefined;
      });
      slow.destroy();
      for (const [i, offset] of offsets.entries()) {
        const expected = await app.inject({ url: pagePath(offset), headers: { 'x-vital-api-key': team.key } });
        assert.equal(bodies[i]!.status, 200);
        assert.ok(bodies[i]!.body.equals(expected.rawPayload), `page at offset ${offset}, answer ${i} of the pipeline, byte for byte`);
      }
    });
  });
});

/** Responses with a Content-Length, one after another, as long as they are complete. */
function parseResponses(bytes: Buffer): { status: number; body: Buffer }[] {
  const responses: { status: number; body: Buffer }[] = [];
  let at = 0;
  for (;;) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return responses;
    const head = bytes.subarray(at, headEnd).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1]);
    assert.ok(Number.isInteger(length), `a Content-Length in ${head}`);
    if (headEnd + 4 + length > bytes.length) return responses;
    responses.push({ status: Number(head.split(' ')[1]), body: bytes.subarray(headEnd + 4, headEnd + 4 + length) });
    at = headEnd + 4 + length;
  }
}

/**
 * Logs: one JSON line per request with the fields an operator needs, an
 * audit line naming the user records returned, and never a key or a body.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { buildApp, type App } from '../src/app.js';
import { lazyChildLogger } from '../src/http/fast-path/lazy-child-logger.js';
import type { Sql } from '../src/db/client.js';
import { collectingStream, teamWithUsers, testConfig, testSql, type TeamWithUsers } from './helpers.js';
import { scanLogsForKeys } from './key-leak-scan.js';

describe('request and audit logs', () => {
  let sql: Sql;
  let app: App;
  let text = '';
  let team: TeamWithUsers;
  const lines = () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);

  before(async () => {
    sql = testSql();
    const stream = new Writable({ write(chunk, _enc, cb) { text += chunk; cb(); } });
    app = await buildApp({ config: testConfig(), sql, logger: { level: 'info', stream } });
    team = await teamWithUsers(sql, 4);
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  it('writes one line per request with id, method, route, status, duration, team and key', async () => {
    text = '';
    const badKey = `hds_${randomBytes(32).toString('base64url')}`;
    const user = team.users[0]!;
    const calls = [
      { req: { url: '/v2/user/?limit=2', headers: { 'x-service-api-key': team.key, 'x-request-id': 'req-list' } }, route: '/v2/user/', status: 200, auth: true },
      { req: { url: `/v2/user/${user.user_id}`, headers: { 'x-service-api-key': team.key, 'x-request-id': 'req-get' } }, route: '/v2/user/:user_id', status: 200, auth: true },
      { req: { url: '/v2/user/00000000-0000-4000-8000-000000000000', headers: { 'x-service-api-key': team.key, 'x-request-id': 'req-404' } }, route: '/v2/user/:user_id', status: 404, auth: true },
      { req: { url: '/v2/user/', headers: { 'x-service-api-key': badKey, 'x-request-id': 'req-401' } }, route: '/v2/user/', status: 401, auth: false },
      { req: { method: 'POST' as const, url: '/v2/user/', headers: { 'x-service-api-key': team.key, 'x-request-id': 'req-post' }, payload: { client_user_id: 'log-secret-client-id' } }, route: '/v2/user/', status: 200, auth: true },
    ];
    for (const c of calls) {
      const res = await app.inject(c.req);
      assert.equal(res.statusCode, c.status, c.req.url);
      assert.equal(res.headers['x-request-id'], c.req.headers['x-request-id']);
    }
    const requests = lines().filter((l) => l.msg === 'request');
    assert.equal(requests.length, calls.length, 'one line per request');
    for (const [i, c] of calls.entries()) {
      const line = requests[i]!;
      assert.equal(line.request_id, c.req.headers['x-request-id']);
      assert.equal(line.method, c.req.method ?? 'GET');
      assert.equal(line.route, c.route, 'the route pattern, not the raw URL with ids');
      assert.equal(line.status, c.status);
      assert.equal(typeof line.duration_ms, 'number');
      assert.ok(line.duration_ms >= 0);
      assert.equal(line.team_id, c.auth ? team.teamId : null);
      assert.equal(line.key_id, c.auth ? team.keyId : null);
      assert.equal(typeof line.time, 'number');
    }

    // Never the key (good or bad), never a body: neither the request's nor the users returned.
    assert.ok(!text.includes(team.key) && !text.includes(badKey), 'a key reached the log');
    assert.ok(!text.includes('log-secret-client-id'), 'a request body reached the log');
    for (const u of team.users) assert.ok(!text.includes(u.client_user_id), 'a response body reached the log');
  });

  it('writes a valid JSON line whatever the request id, path or method (the line quotes nothing itself)', async () => {
    text = '';
    const hostileIds = ['"}{"level":60', 'back\\slash', 'ünïcode', 'new\nline'.replace('\n', ' '), `"${'x'.repeat(200)}`];
    for (const id of hostileIds) {
      const res = await app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key, 'x-request-id': id } });
      assert.notEqual(res.headers['x-request-id'], id, 'an unsafe id is replaced');
    }
    await app.inject({ method: 'PROPFIND', url: '/"quoted"/\\path' });
    await app.inject({ method: 'DELETE', url: '/v2/user/', headers: { 'x-request-id': 'a.b:c-d_E' } });
    const requests = lines().filter((l) => l.msg === 'request');
    assert.equal(requests.length, hostileIds.length + 2, 'every line parsed as JSON');
    for (const line of requests.slice(0, hostileIds.length)) assert.match(line.request_id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(requests.slice(-2).map((l) => [l.method, l.route, l.status, l.request_id]),
      [['PROPFIND', null, 404, requests.at(-2)!.request_id], ['DELETE', '/v2/user/', 405, 'a.b:c-d_E']]);
  });

  it('audits the user ids returned on the request line, with team and key', async () => {
    text = '';
    const page = await app.inject({ url: '/v2/user/?limit=3', headers: { 'x-service-api-key': team.key } });
    const one = await app.inject({ url: `/v2/user/${team.users[1]!.user_id}`, headers: { 'x-service-api-key': team.key } });
    await app.inject({ url: '/v2/user/00000000-0000-4000-8000-000000000000', headers: { 'x-service-api-key': team.key } });
    const audits = lines().filter((l) => l.audit);
    assert.equal(audits.length, 2, 'one audit record per answer that returned records, none for the 404');
    assert.deepEqual(audits[0]!.audit, { user_ids: page.json().users.map((u: { user_id: string }) => u.user_id) });
    assert.deepEqual(audits[1]!.audit, { user_ids: [one.json().user_id] });
    for (const a of audits) {
      assert.equal(a.msg, 'request', 'the audit record is the request\'s own line');
      assert.equal(a.team_id, team.teamId);
      assert.equal(a.key_id, team.keyId);
      assert.equal(a.status, 200);
    }
    assert.equal(audits[0]!.request_id, page.headers['x-request-id'], 'the audit line carries the request id');
  });

  it("a request's own logger is made on first use, with the request id", async () => {
    const { stream, lines: logged } = collectingStream();
    const root = pino({ level: 'info' }, stream);
    const child = lazyChildLogger.call(app, root, { request_id: 'lazy-1' }, {}, {} as never);
    assert.equal(child.level, 'info');
    child.debug('below the level');
    child.warn({ reason: 'x' }, 'a warning');
    await new Promise((r) => setImmediate(r));
    const [line, ...rest] = logged();
    assert.equal(rest.length, 0);
    assert.deepEqual([line!.request_id, line!.msg, line!.reason, line!.level], ['lazy-1', 'a warning', 'x', 40]);
  });

  it('the suite-wide check finds a key hidden anywhere in a log line', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-scan-'));
    try {
      const key = `hds_${randomBytes(32).toString('base64url')}`;
      fs.writeFileSync(path.join(dir, '1.log'), '{"msg":"request"}\n{"msg":"x"}\n');
      fs.writeFileSync(path.join(dir, '2.log'), `{"msg":"ok"}\n{"err":{"message":"bad header ${key}!"}}\n`);
      assert.deepEqual(scanLogsForKeys(dir), { files: 2, lines: 4, leaks: ['2.log:2'] });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

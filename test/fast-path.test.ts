/**
 * The rules the fast path (src/http/fast-path/README.md) relies on, each
 * checked where it is stated.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { KEY_NOT_CACHED, KeyVerifier } from '../src/auth/key-verifier.js';
import type { Sql } from '../src/db/client.js';
import { MemoryStore } from '../src/http/rate-limit-store.js';
import { REQUEST_ID_PATTERN, requestIdFor } from '../src/http/fast-path/request-id.js';
import { RequestStats } from '../src/http/fast-path/request-stats.js';
import { teamWithKey, testSql, type TestTeam } from './helpers.js';

const requestWithId = (id: unknown) => ({ headers: { 'x-request-id': id } }) as unknown as IncomingMessage;

describe('request ids', () => {
  it('admit no character that JSON would escape, so the log line may write them as they are', () => {
    for (let code = 0; code < 0x3000; code++) {
      const c = String.fromCharCode(code);
      if (REQUEST_ID_PATTERN.test(`a${c}b`)) assert.equal(JSON.stringify(c), `"${c}"`, `U+${code.toString(16)} passes the pattern but needs escaping`);
    }
  });

  it("are the caller's when sane, a new UUID otherwise", () => {
    assert.equal(requestIdFor(requestWithId('trace-42:a.b_c')), 'trace-42:a.b_c');
    for (const bad of ['with"quote', 'back\\slash', 'new\nline', '', 'x'.repeat(129), ['a', 'b']]) {
      const id = requestIdFor(requestWithId(bad));
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `kept ${JSON.stringify(bad)}`);
    }
  });
});

/** Samples of the Prometheus text format, comments skipped, labels sorted: comparable across renderers. */
function samples(text: string, names: string[]): string[] {
  return text.split('\n')
    .filter((line) => line !== '' && !line.startsWith('#') && names.some((n) => line.startsWith(n)))
    .map((line) => {
      const m = /^([\w:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
      assert.ok(m, `not a sample line: ${line}`);
      const labels = [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => `${l[1]}=${l[2]}`).sort();
      return `${m[1]}{${labels.join(',')}} ${Number(m[3])}`;
    })
    .sort();
}

describe('request stats', () => {
  it("render the samples prom-client's own counter and histogram render for the same observations", async () => {
    const observations: [string, string, number, number][] = [
      ['GET', '/v2/user/', 200, 0.0004], ['GET', '/v2/user/', 200, 0.003], ['GET', '/v2/user/', 200, 12],
      ['GET', '/v2/user/:user_id', 401, 0.001], ['POST', '/v2/user/', 422, 0.0025], ['GET', 'unmatched', 404, 0.7],
      ['GET', '/odd"route\\with\nescapes', 200, 0.05],
    ];
    const ours = new RequestStats();
    const registry = new Registry();
    const labelNames = ['method', 'route', 'status'] as const;
    const counter = new Counter({ name: 'http_requests_total', help: 'h', labelNames, registers: [registry] });
    const histogram = new Histogram({
      name: 'http_request_duration_seconds', help: 'h', labelNames, registers: [registry],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    });
    for (const [method, route, status, seconds] of observations) {
      ours.record(method, route, status, seconds);
      counter.inc({ method, route, status: String(status) });
      histogram.observe({ method, route, status: String(status) }, seconds);
    }
    const names = ['http_requests_total', 'http_request_duration_seconds'];
    assert.deepEqual(samples(ours.render(), names), samples(await registry.metrics(), names));
  });
});

describe('answers that are known now, and the lookups behind them', () => {
  let sql: Sql;
  let team: TestTeam;
  before(async () => {
    sql = testSql();
    team = await teamWithKey(sql);
  });
  after(async () => {
    await sql.end();
  });

  it('a key is judged at once when missing, malformed or cached, and looked up once otherwise', async () => {
    const verifier = new KeyVerifier(sql, 60_000);
    assert.equal(verifier.verifyCached(undefined), undefined);
    assert.equal(verifier.verifyCached('not-a-key'), undefined);
    assert.equal(verifier.verifyCached(team.key), KEY_NOT_CACHED);
    assert.deepEqual(await verifier.verifyByLookup(team.key), { teamId: team.teamId, keyId: team.keyId });
    assert.deepEqual(verifier.verifyCached(team.key), { teamId: team.teamId, keyId: team.keyId });

    const unknown = `hds_${'A'.repeat(43)}`;
    assert.equal(verifier.verifyCached(unknown), KEY_NOT_CACHED);
    assert.equal(await verifier.verifyByLookup(unknown), undefined);
    assert.equal(verifier.verifyCached(unknown), undefined, 'a refusal is remembered like an acceptance');
    assert.equal(verifier.lookups, 2);
  });

  it('a window kept in memory is counted at once', () => {
    const store = new MemoryStore(60_000);
    assert.equal(store.hitNow('a')?.count, 1);
    assert.equal(store.hitNow('a')?.count, 2);
    assert.equal(store.hitNow('b')?.count, 1);
  });
});

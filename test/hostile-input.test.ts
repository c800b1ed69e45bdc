/**
 * Hostile input on the write routes: refused values that stayed in memory,
 * client data in the log, bytes that are not UTF-8, personal data slipped
 * past the client_user_id rule, and the smaller leaks of contract section 6
 * (415, 414, the input of a 422).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { LightMyRequestResponse } from 'fastify';
import postgres from 'postgres';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { ImportError, parseImportLine } from '../src/import/line.js';
import { userDocument } from '../src/user-document/document.js';
import { isClientUserId, isPastDate, isTimeZone } from '../src/user-document/rules.js';
import { appWithTeam, loggedApp, teamWithKey, type TestTeam } from './helpers.js';

const MB = 1024 * 1024;
const unique = (prefix: string) => `${prefix}-${randomUUID()}`;

/** A full collection, so that what is measured after it is what is still held. */
function collector(): () => void {
  if (typeof globalThis.gc === 'function') return globalThis.gc;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** Runs `body` while counting the Intl.DateTimeFormat objects built: how isTimeZone judges a zone it has not cached. */
function countingZoneChecks(body: () => void): number {
  const original = Intl.DateTimeFormat;
  let built = 0;
  const counting = new Proxy(original, { construct: (target, args) => { built++; return Reflect.construct(target, args) as object; } });
  Object.defineProperty(Intl, 'DateTimeFormat', { value: counting, writable: true, configurable: true });
  try {
    body();
  } finally {
    Object.defineProperty(Intl, 'DateTimeFormat', { value: original, writable: true, configurable: true });
  }
  return built;
}

describe('hostile input on the write routes', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;

  appWithTeam((fixture) => ({ sql, app, team } = fixture));

  const send = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: Buffer | string | object, headers: Record<string, string> = {}) =>
    app.inject({
      method, url, headers: { 'x-service-api-key': team.key, ...(Buffer.isBuffer(payload) || typeof payload === 'string' ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(payload === undefined ? {} : { payload }),
    });
  const fresh = async (body: Record<string, unknown> = {}) => {
    const res = await send('POST', '/v2/user/', { client_user_id: unique('hostile'), ...body });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as Record<string, any>;
  };
  const stored = async (userId: string) => {
    const res = await send('GET', `/v2/user/${userId}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as Record<string, any>;
  };
  const usersNamed = async (clientUserId: string) =>
    (await sql`SELECT count(*)::int AS n FROM users WHERE team_id = ${team.teamId} AND client_user_id = ${clientUserId}`)[0]!.n as number;

  describe('refused input never stays in memory', () => {
    it('10,000 oversized invalid values through every cached rule leave the heap, the resident set and the zone cache as they were', async (t) => {
      const gc = collector();
      const user = await fresh();
      const junk = (i: number) => `Z${i}-${'a'.repeat(16_200)}`;
      const refuse = async (res: Promise<LightMyRequestResponse>, field: string) => {
        const answer = await res;
        assert.equal(answer.statusCode, 422, answer.body.slice(0, 200));
        assert.deepEqual(answer.json().detail.map((d: { loc: string[] }) => d.loc), [['body', field]]);
      };
      // A full collection every hundred values: what is refused then is garbage the next one frees, whereas a
      // cache that keeps it grows by every value. Left to pile up, 30,000 values of garbage between collections
      // grew the resident set by up to 100 MB (allocator pages not given back), kept or not.
      const collectNow = (i: number) => { if (i % 100 === 99) gc(); };
      const throughTheRoutes = async (from: number, count: number) => {
        for (let i = from; i < from + count; i++) {
          await refuse(send('POST', '/v2/user/', { client_user_id: unique('flood'), fallback_time_zone: junk(i) }), 'fallback_time_zone');
          await refuse(send('PATCH', `/v2/user/${user.user_id}`, { fallback_time_zone: junk(-i) }), 'fallback_time_zone');
          collectNow(i);
        }
      };
      // Warm up the paths measured and the allocator, so that what they take once is not counted as held.
      await throughTheRoutes(-200, 100);
      gc();
      const before = process.memoryUsage();
      // Every rule of a user's values judges 10,000 distinct oversized values directly (the rules are what
      // keep verdicts; the zone rule kept 9,000 such values before, heap +140 MB), and 500 go through each
      // write route, as a client sends them.
      for (let i = 0; i < 10_000; i++) {
        assert.equal(isTimeZone(junk(i)), false);
        assert.equal(isClientUserId(`c${i}${'b'.repeat(16_000)}@example.com`), false);
        assert.equal(isPastDate(`${i}${'9'.repeat(16_000)}`), false);
        collectNow(i);
      }
      await throughTheRoutes(0, 500);
      gc();
      const afterFlood = process.memoryUsage();
      // 31,000 values of 16 KB: 500 MB if they were kept. The heap is the exact measure (about 0 now); the
      // resident set also keeps some of what the allocator took for the flood's buffers, hence its wider bound.
      const heapGrowth = (afterFlood.heapUsed - before.heapUsed) / MB;
      const rssGrowth = (afterFlood.rss - before.rss) / MB;
      t.diagnostic(`heap ${heapGrowth.toFixed(1)} MB, resident set ${rssGrowth.toFixed(1)} MB`);
      assert.ok(heapGrowth < 20, `the heap grew by ${heapGrowth.toFixed(1)} MB`);
      assert.ok(rssGrowth < 64, `the resident set grew by ${rssGrowth.toFixed(1)} MB`);

      // The zone cache still takes valid zones: a zone judged twice is built once.
      assert.equal(countingZoneChecks(() => {
        assert.equal(isTimeZone('Pacific/Chatham'), true);
        assert.equal(isTimeZone('Pacific/Chatham'), true);
      }), 1, 'Pacific/Chatham judged twice from scratch: the cache is full');
      const res = await send('PATCH', `/v2/user/${user.user_id}`, { fallback_time_zone: 'Pacific/Chatham' });
      assert.equal(res.statusCode, 204, res.body);
    });

    it('the zone cache keeps taking the newest zones after 12,000 well-shaped unknown ones', () => {
      // Well-shaped and unknown: their verdicts may be kept, but not all of them, and not instead of the newest.
      for (let i = 0; i < 12_000; i++) assert.equal(isTimeZone(`Nowhere/Z${i}${'q'.repeat(48)}`), false);
      assert.equal(countingZoneChecks(() => {
        assert.equal(isTimeZone('America/Punta_Arenas'), true);
        assert.equal(isTimeZone('America/Punta_Arenas'), true);
      }), 1, 'America/Punta_Arenas judged twice from scratch');
    });

    it('the source cache of the stored documents stays bounded whatever sources pass through it', () => {
      const gc = collector();
      gc();
      const before = process.memoryUsage().heapUsed;
      const user = {
        user_id: randomUUID(), team_id: randomUUID(), client_user_id: 'x', created_on: '2024-01-01T00:00:00+00:00',
        fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
      };
      for (let i = 0; i < 10_000; i++) {
        const source = { name: `n${i}${'n'.repeat(190)}`, slug: `s${i}${'s'.repeat(90)}`, logo: `https://l/${i}${'l'.repeat(1980)}` };
        userDocument({ ...user, connected_sources: [{ created_on: '2024-01-01T00:00:00+00:00', source }] });
      }
      gc();
      const growth = (process.memoryUsage().heapUsed - before) / MB;
      assert.ok(growth < 20, `the heap grew by ${growth.toFixed(1)} MB`);
    });
  });

  describe('the log', () => {
    it('holds no client_user_id, body or query value on any write route; the undo line names the restored user', async () => {
      const logged = await loggedApp(sql);
      try {
        const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
          logged.app.inject({ method, url, headers: { 'x-service-api-key': team.key }, ...(payload ? { payload } : {}) });
        const secret = unique('secret-client');
        const renamed = unique('secret-renamed');
        const created = await call('POST', '/v2/user/', { client_user_id: secret, fallback_birth_date: '1971-02-03' });
        assert.equal(created.statusCode, 200, created.body);
        const userId = created.json().user_id as string;
        assert.equal((await call('PATCH', `/v2/user/${userId}`, { client_user_id: renamed, fallback_time_zone: 'Asia/Kathmandu' })).statusCode, 204);
        assert.equal((await call('GET', `/v2/user/resolve/${renamed}`)).statusCode, 200);
        assert.equal((await call('GET', `/v2/team/users/search?query_id=${renamed}`)).statusCode, 200);
        assert.equal((await call('POST', '/v2/user/', { client_user_id: renamed })).statusCode, 400);
        assert.equal((await call('PATCH', `/v2/user/${userId}`, { fallback_time_zone: 'Secret/Zone-1' })).statusCode, 422);
        assert.equal((await call('DELETE', `/v2/user/${userId}`)).statusCode, 200);
        const undone = await call('POST', `/v2/user/undo_delete?client_user_id=${renamed}`);
        assert.equal(undone.statusCode, 200, undone.body);
        assert.equal((await call('POST', `/v2/user/undo_delete?client_user_id=${renamed}`)).statusCode, 404);

        const text = logged.lines().map((l) => JSON.stringify(l)).join('\n');
        for (const value of [secret, renamed, 'Asia/Kathmandu', 'Secret/Zone-1', '1971-02-03']) {
          assert.ok(!text.includes(value), `${value} reached the log`);
        }
        const audit = logged.lines().filter((l) => l.msg === 'user deletion undone' || l.msg === 'user scheduled for deletion');
        assert.equal(audit.length, 2);
        for (const line of audit) {
          assert.equal(line.team_id, team.teamId, line.msg);
          assert.equal(line.key_id, team.keyId, line.msg);
          assert.equal(line.user_id, userId, line.msg);
          assert.equal(line.client_user_id, undefined, line.msg);
        }
      } finally {
        await logged.app.close();
      }
    });

    it('keeps the values PostgreSQL quotes out of the line of an unexpected database error', async () => {
      const secret = unique('secret-value');
      // Real errors of the driver, whose message or detail quote the value.
      const syntax = await sql`SELECT ${secret}::uuid`.then(() => assert.fail('no error'), (err: unknown) => err);
      const duplicate = await sql.begin(async (tx) => {
        await tx`CREATE TEMP TABLE hostile_values (v text UNIQUE)`;
        await tx`INSERT INTO hostile_values VALUES (${secret}), (${secret})`;
      }).then(() => assert.fail('no error'), (err: unknown) => err);
      for (const [error, code] of [[syntax, '22P02'], [duplicate, '23505']] as const) {
        assert.ok(error instanceof postgres.PostgresError && JSON.stringify({ ...error, message: error.message }).includes(secret), 'the error quotes the value');
        // Every query of this app fails with it: the key's lookup first, a 500.
        const failing = new Proxy(sql, { apply: () => Promise.reject(error) });
        const logged = await loggedApp(failing);
        try {
          const res = await logged.app.inject({ url: '/v2/user/', headers: { 'x-service-api-key': team.key } });
          assert.deepEqual([res.statusCode, res.json()], [500, { detail: 'Internal Server Error' }]);
          const line = logged.lines().find((l) => l.msg === 'unhandled error');
          assert.ok(line, 'the error is logged');
          assert.equal(line.err.code, code);
          assert.ok(line.err.stack, 'with where it happened');
          assert.ok(!JSON.stringify(logged.lines()).includes(secret), `${code}: the value reached the log`);
        } finally {
          await logged.app.close();
        }
      }
    });
  });

  describe('bodies that are not UTF-8', () => {
    const invalidBytes: [string, number[]][] = [
      ['an encoded lone surrogate and FF', [0xed, 0xa0, 0x80, 0xff]],
      ['an encoded lone surrogate', [0xed, 0xa0, 0x80]],
      ['FF FE', [0xff, 0xfe]],
      ['an over-long NUL', [0xc0, 0x80]],
      ['a truncated sequence', [0xe2, 0x82]],
    ];
    const withBytes = (head: string, bytes: number[], tail: string) => Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]);
    const assertNotUtf8 = (res: LightMyRequestResponse, what: string) => {
      assert.equal(res.statusCode, 422, `${what}: ${res.body}`);
      const detail = res.json().detail as Record<string, unknown>[];
      assert.equal(detail.length, 1, res.body);
      assert.deepEqual([detail[0]!.type, detail[0]!.loc, detail[0]!.input], ['json_invalid', ['body'], null], res.body);
      assert.match(String(detail[0]!.msg), /UTF-8/, res.body);
    };

    for (const [what, bytes] of invalidBytes) {
      it(`refuses ${what} with 422 on every JSON route, and stores nothing`, async () => {
        const user = await fresh();
        const name = unique('bytes');
        assertNotUtf8(await send('POST', '/v2/user/', withBytes(`{"client_user_id":"${name}`, bytes, '"}')), `create: ${what}`);
        assert.equal(await usersNamed(name), 0);
        assertNotUtf8(await send('PATCH', `/v2/user/${user.user_id}`, withBytes(`{"client_user_id":"${name}`, bytes, '"}')), `patch: ${what}`);
        assert.equal((await stored(user.user_id)).client_user_id, user.client_user_id, 'nothing changed');
        assertNotUtf8(await send('POST', `/v2/user/undo_delete?user_id=${user.user_id}`, withBytes('{"x":"', bytes, '"}')), `undo_delete: ${what}`);
        assertNotUtf8(await send('DELETE', `/v2/user/${user.user_id}`, withBytes('{"x":"', bytes, '"}')), `delete: ${what}`);
        await stored(user.user_id);
      });
    }

    it('stores valid multi-byte UTF-8 exactly as sent, a byte order mark at the start ignored', async () => {
      const user = await fresh();
      const name = `ünï-😀-中文-${randomUUID()}`;
      const res = await send('PATCH', `/v2/user/${user.user_id}`, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ client_user_id: name }))]));
      assert.equal(res.statusCode, 204, res.body);
      assert.equal((await stored(user.user_id)).client_user_id, name);
    });
  });

  describe('charsets and content encodings', () => {
    const unsupported = { detail: 'Unsupported Media Type' };

    it('refuses a declared charset other than UTF-8 with 415, and applies nothing', async () => {
      const user = await fresh();
      for (const type of ['application/json; charset=latin1', 'application/json; charset=utf-16', 'application/json;charset="ISO-8859-1"', 'application/json; charset=utf-8; charset=latin1']) {
        const name = unique('charset');
        const created = await send('POST', '/v2/user/', JSON.stringify({ client_user_id: name }), { 'content-type': type });
        assert.deepEqual([created.statusCode, created.json()], [415, unsupported], type);
        assert.match(String(created.headers['content-type']), /^application\/json/);
        assert.equal(await usersNamed(name), 0, type);
        const patched = await send('PATCH', `/v2/user/${user.user_id}`, JSON.stringify({ client_user_id: name }), { 'content-type': type });
        assert.deepEqual([patched.statusCode, patched.json()], [415, unsupported], type);
      }
      assert.equal((await stored(user.user_id)).client_user_id, user.client_user_id, 'nothing changed');
    });

    it('takes charset=utf-8 in any letter case, quoted or not', async () => {
      for (const type of ['application/json; charset=UTF-8', 'application/json;charset="utf-8"', 'Application/JSON; Charset=Utf-8']) {
        const res = await send('POST', '/v2/user/', JSON.stringify({ client_user_id: unique('utf8') }), { 'content-type': type });
        assert.equal(res.statusCode, 200, `${type}: ${res.body}`);
      }
    });

    it('refuses any Content-Encoding but identity with 415, and applies nothing', async () => {
      const user = await fresh();
      for (const encoding of ['gzip', 'deflate', 'br', 'gzip, identity', 'x-custom']) {
        const name = unique('encoding');
        const created = await send('POST', '/v2/user/', JSON.stringify({ client_user_id: name }), { 'content-encoding': encoding });
        assert.deepEqual([created.statusCode, created.json()], [415, unsupported], encoding);
        assert.equal(await usersNamed(name), 0, encoding);
        const patched = await send('PATCH', `/v2/user/${user.user_id}`, JSON.stringify({ client_user_id: name }), { 'content-encoding': encoding });
        assert.deepEqual([patched.statusCode, patched.json()], [415, unsupported], encoding);
      }
      assert.equal((await stored(user.user_id)).client_user_id, user.client_user_id, 'nothing changed');
      const plain = await send('POST', '/v2/user/', JSON.stringify({ client_user_id: unique('identity') }), { 'content-encoding': 'identity' });
      assert.equal(plain.statusCode, 200, plain.body);
    });

    it('still answers 401 first to a request without a key', async () => {
      const res = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'content-type': 'application/json; charset=latin1', 'content-encoding': 'gzip' }, payload: '{}' });
      assert.equal(res.statusCode, 401);
    });
  });

  describe('path parameters over their length', () => {
    const tooLong = { detail: 'URI Too Long' };
    const assertTooLong = (res: LightMyRequestResponse, value: string, what: string) => {
      assert.deepEqual([res.statusCode, res.json()], [414, tooLong], what);
      assert.ok(!res.body.includes(value.slice(0, 20)), `${what}: the path is echoed`);
      assert.match(String(res.headers['content-type']), /^application\/json/, what);
      assert.ok(res.headers['x-request-id'], what);
    };

    it('answers 414 without echoing it, on every route, before the key is checked', async () => {
      const user = await fresh();
      const longId = `${randomUUID()}${'a'.repeat(464)}`;
      const longSlug = 'oura'.repeat(26);
      const longClientId = `k${'z'.repeat(255)}`;
      const justOver = `${randomUUID()}0`;
      const cases: [method: 'GET' | 'PATCH' | 'DELETE', url: string, value: string][] = [
        ['GET', `/v2/user/${longId}`, longId],
        ['PATCH', `/v2/user/${longId}`, longId],
        ['DELETE', `/v2/user/${longId}`, longId],
        ['GET', `/v2/user/providers/${longId}`, longId],
        ['DELETE', `/v2/user/${longId}/oura`, longId],
        ['DELETE', `/v2/user/${user.user_id}/${longSlug}`, longSlug],
        ['GET', `/v2/user/resolve/${longClientId}`, longClientId],
        ['GET', `/v2/user/${justOver}`, justOver],
      ];
      for (const [method, url, value] of cases) {
        const payload = method === 'PATCH' ? { fallback_time_zone: 'UTC' } : undefined;
        assertTooLong(await send(method, url, payload), value, `${method} ${url.slice(0, 60)}`);
        assertTooLong(await app.inject({ method, url, ...(payload ? { payload } : {}) }), value, `${method} ${url.slice(0, 60)} without a key`);
      }
    });

    it('answers values at the limit as before: 422 for a malformed id, 404 for an unknown client_user_id', async () => {
      const malformed = 'x'.repeat(36);
      const res = await send('GET', `/v2/user/${malformed}`);
      assert.equal(res.statusCode, 422, res.body);
      assert.deepEqual(res.json().detail[0].loc, ['path', 'user_id']);
      assert.equal((await send('GET', `/v2/user/resolve/${'z'.repeat(255)}`)).statusCode, 404);
      // 255 characters outside the BMP: 510 UTF-16 units, still 255 characters.
      assert.equal((await send('GET', `/v2/user/resolve/${encodeURIComponent('😀'.repeat(255))}`)).statusCode, 404);
      const user = await fresh();
      const slug = await send('DELETE', `/v2/user/${user.user_id}/${'q'.repeat(100)}`);
      assert.equal(slug.statusCode, 422, slug.body);
      assert.deepEqual(slug.json().detail[0].loc, ['path', 'provider']);
    });
  });

  describe('the ingestion bounds against the stored ones', () => {
    it('names the field sent and its value, never the stored one', async () => {
      const user = await fresh({ ingestion_start: '2024-06-01' });
      const early = await send('PATCH', `/v2/user/${user.user_id}`, { ingestion_end: '2024-01-01' });
      assert.equal(early.statusCode, 422, early.body);
      assert.deepEqual(early.json().detail.map((d: Record<string, unknown>) => [d.type, d.loc, d.input]), [['value_error', ['body', 'ingestion_end'], '2024-01-01']]);
      assert.ok(!early.body.includes('2024-06-01'), 'the stored start is not in the answer');

      const other = await fresh({ ingestion_end: '2024-01-01' });
      const late = await send('PATCH', `/v2/user/${other.user_id}`, { ingestion_start: '2024-06-01' });
      assert.deepEqual(late.json().detail.map((d: Record<string, unknown>) => [d.type, d.loc, d.input]), [['value_error', ['body', 'ingestion_start'], '2024-06-01']]);
      assert.ok(!late.body.includes('2024-01-01'), 'the stored end is not in the answer');
    });
  });

  describe('client_user_id: no e-mail address or phone number, however written', () => {
    const refused = [
      'jane.doe@example.com', 'user@example.com ', ' user@example.com', '\tuser@example.com', 'user＠example.com', 'user@@example.com',
      'user@localhost', 'a@b', 'mailto:user@example.com', 'MAILTO:user@example.com',
      'tel:+15551234567', 'TEL:+1-555-123-4567', 'tel:5551234567', '+15551234567', '+1/555/123/4567', '+1_555_123_4567',
      '+1 555 123 4567 x1', '+1 555 123 4567 ext. 12', '(555) 123-4567 ext 3', '+１ ５５５ １２３ ４５６７', '＋１５５５１２３４５６７',
      '+44 20 7946 0958', '(555) 123-4567', '555.123.4567', '555-123-4567', ' 555 123 4567 ', '+1 (555) 123--4567', '555–123–4567',
    ];
    const accepted = [
      '12345678901', '5551234567', '1234567', '123456789012345678', '01ARZ3NDEKTSV4RRFFQ69G5FAV', 'team-42', 'user_123', 'abc-123',
      'd734e32e-dd43-4b77-ab56-692524279531', '@handle', 'user@', 'x1', 'box-12', '12-34', 'order 12345', 'ünï/cødé #?&',
    ];

    it('the rule refuses every way of writing one, and keeps plain ids', () => {
      for (const value of refused) assert.equal(isClientUserId(value), false, JSON.stringify(value));
      for (const value of accepted) assert.equal(isClientUserId(value), true, JSON.stringify(value));
    });

    it('create and PATCH refuse them with 422 at body.client_user_id and store nothing', async () => {
      const user = await fresh();
      for (const value of refused) {
        const created = await send('POST', '/v2/user/', { client_user_id: value });
        assert.equal(created.statusCode, 422, `${JSON.stringify(value)}: ${created.body}`);
        assert.deepEqual(created.json().detail.map((d: { loc: string[] }) => d.loc), [['body', 'client_user_id']]);
        assert.equal(await usersNamed(value), 0, JSON.stringify(value));
        const patched = await send('PATCH', `/v2/user/${user.user_id}`, { client_user_id: value });
        assert.equal(patched.statusCode, 422, `${JSON.stringify(value)}: ${patched.body}`);
      }
      assert.equal((await stored(user.user_id)).client_user_id, user.client_user_id);
    });

    it('create takes the plain ids as sent', async () => {
      const own = await teamWithKey(sql);
      for (const value of accepted) {
        const res = await app.inject({ method: 'POST', url: '/v2/user/', headers: { 'x-service-api-key': own.key }, payload: { client_user_id: value } });
        assert.equal(res.statusCode, 200, `${JSON.stringify(value)}: ${res.body}`);
        assert.equal(res.json().client_user_id, value);
      }
    });

    it('the import refuses them by the same rule', () => {
      const line = (clientUserId: string) => JSON.stringify({
        user_id: randomUUID(), team_id: randomUUID(), client_user_id: clientUserId, created_on: '2024-01-01T00:00:00+00:00',
        connected_sources: [], fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
      });
      for (const value of refused) assert.throws(() => parseImportLine(line(value), 1), ImportError, JSON.stringify(value));
      for (const value of accepted) assert.equal(parseImportLine(line(value), 1).client_user_id, value);
    });
  });
});

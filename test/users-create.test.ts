/** POST /v2/user/: the create-user rules of contract section 5. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { appWithTeam, teamWithKey, type TestTeam } from './helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$/;

/** A date `days` from today (UTC), as YYYY-MM-DD. */
const dayFromToday = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);

describe('POST /v2/user/', () => {
  let sql: Sql;
  let app: App;
  let team: TestTeam;

  appWithTeam((fixture) => ({ sql, app, team } = fixture), 'create');

  const create = (payload: unknown, { key = team.key, url = '/v2/user/', headers = {} as Record<string, string> } = {}) =>
    app.inject({
      method: 'POST', url, headers: { 'x-service-api-key': key, ...headers },
      ...(typeof payload === 'string' ? { payload } : { payload: payload as object }),
    });
  const get = (url: string, key = team.key) => app.inject({ url, headers: { 'x-service-api-key': key } });
  const unique = (prefix: string) => `${prefix}-${randomUUID()}`;
  const total = async (key = team.key) => (await get('/v2/user/?limit=1', key)).json().total as number;
  const usersNamed = async (clientUserId: string) =>
    (await sql`SELECT user_id FROM users WHERE team_id = ${team.teamId} AND client_user_id = ${clientUserId}`).length;

  function assertRefused(res: LightMyRequestResponse, field: string): void {
    assert.equal(res.statusCode, 422, res.body);
    const locs = res.json().detail.map((i: { loc: string[] }) => i.loc.join('.'));
    assert.ok(locs.includes(`body.${field}`), `expected a problem at body.${field}, got ${locs.join(', ')}`);
  }

  describe('success', () => {
    it('answers 200 with the whole new user, as GET answers it', async () => {
      const clientUserId = unique('ok');
      const res = await create({ client_user_id: clientUserId, fallback_time_zone: 'Asia/Tokyo' });
      assert.equal(res.statusCode, 200, res.body);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = res.json();
      assert.deepEqual(Object.keys(body), [
        'user_id', 'team_id', 'client_user_id', 'created_on', 'connected_sources', 'fallback_time_zone',
        'fallback_birth_date', 'ingestion_start', 'ingestion_end',
      ]);
      assert.match(body.user_id, UUID);
      assert.equal(body.client_user_id, clientUserId);
      assert.equal(res.body, (await get(`/v2/user/${body.user_id}`)).body);
    });

    it('makes the user readable by GET and by resolve, with the given values', async () => {
      const clientUserId = unique('readable');
      const before = Date.now();
      const res = await create({
        client_user_id: clientUserId, fallback_time_zone: 'Europe/London', fallback_birth_date: '1980-03-13',
        ingestion_start: '2024-01-01', ingestion_end: '2024-06-30',
      });
      assert.equal(res.statusCode, 200, res.body);
      const { user_id } = res.json();
      const byId = await get(`/v2/user/${user_id}`);
      assert.equal(byId.statusCode, 200);
      const u = byId.json();
      assert.equal(u.user_id, user_id);
      assert.equal(u.team_id, team.teamId);
      assert.equal(u.client_user_id, clientUserId);
      assert.match(u.created_on, DATE_TIME);
      assert.ok(Math.abs(Date.parse(u.created_on) - before) < 60_000, `created_on ${u.created_on} is now`);
      assert.deepEqual(u.connected_sources, []);
      assert.deepEqual(u.fallback_time_zone, { id: 'Europe/London', source_slug: 'manual', updated_at: u.fallback_time_zone.updated_at });
      assert.deepEqual(u.fallback_birth_date, { value: '1980-03-13', source_slug: 'manual', updated_at: u.fallback_birth_date.updated_at });
      for (const t of [u.fallback_time_zone.updated_at, u.fallback_birth_date.updated_at]) {
        assert.match(t, DATE_TIME);
        assert.ok(Math.abs(Date.parse(t) - before) < 60_000);
      }
      assert.equal(u.ingestion_start, '2024-01-01');
      assert.equal(u.ingestion_end, '2024-06-30');
      const resolved = await get(`/v2/user/resolve/${encodeURIComponent(clientUserId)}`);
      assert.equal(resolved.body, byId.body);
    });

    it('works on /v2/user without the slash too', async () => {
      const res = await create({ client_user_id: unique('noslash') }, { url: '/v2/user' });
      assert.equal(res.statusCode, 200, res.body);
    });

    it('grows total by exactly one', async () => {
      const n = await total();
      assert.equal((await create({ client_user_id: unique('count') })).statusCode, 200);
      assert.equal(await total(), n + 1);
      assert.equal((await create({ client_user_id: unique('count') })).statusCode, 200);
      assert.equal(await total(), n + 2);
    });
  });

  describe('duplicates', () => {
    it("answers 400 with the existing user's id and created_on, and creates nothing", async () => {
      const clientUserId = unique('dup');
      const first = await create({ client_user_id: clientUserId });
      const existing = (await get(`/v2/user/${first.json().user_id}`)).json();
      const n = await total();
      for (const payload of [{ client_user_id: clientUserId }, { client_user_id: clientUserId, fallback_time_zone: 'UTC' }]) {
        const res = await create(payload);
        assert.equal(res.statusCode, 400, res.body);
        assert.match(String(res.headers['content-type']), /^application\/json/);
        const { detail } = res.json();
        assert.deepEqual(Object.keys(res.json()), ['detail']);
        // The upstream's exact strings: clients match on them.
        assert.equal(detail.error_type, 'INVALID_REQUEST');
        assert.equal(detail.error_message, 'Client user id already exists.');
        assert.equal(detail.user_id, existing.user_id);
        assert.equal(detail.created_on, existing.created_on);
      }
      assert.equal(await total(), n);
      // The first user is untouched by the refused second create.
      assert.equal((await get(`/v2/user/${existing.user_id}`)).json().fallback_time_zone, null);
    });

    it('allows the same client_user_id in another team', async () => {
      const clientUserId = unique('two-teams');
      const otherTeam = await teamWithKey(sql, 'create other');
      const a = await create({ client_user_id: clientUserId });
      const b = await create({ client_user_id: clientUserId }, { key: otherTeam.key });
      assert.equal(a.statusCode, 200);
      assert.equal(b.statusCode, 200);
      assert.notEqual(a.json().user_id, b.json().user_id);
    });

    for (const concurrency of [2, 10]) {
      it(`${concurrency} concurrent creates of one client_user_id yield exactly one user`, async () => {
        const clientUserId = unique(`race${concurrency}`);
        const n = await total();
        const answers = await Promise.all(Array.from({ length: concurrency }, () => create({ client_user_id: clientUserId })));
        const codes = answers.map((r) => r.statusCode).sort();
        assert.deepEqual(codes, [200, ...Array(concurrency - 1).fill(400)], answers.map((r) => r.body).join('\n'));
        const winner = answers.find((r) => r.statusCode === 200)!.json().user_id;
        for (const r of answers.filter((x) => x.statusCode === 400)) assert.equal(r.json().detail.user_id, winner);
        assert.equal(await usersNamed(clientUserId), 1);
        assert.equal(await total(), n + 1);
      });
    }

    it('concurrent creates of different client_user_ids all succeed and are all counted', async () => {
      const n = await total();
      const answers = await Promise.all(Array.from({ length: 10 }, () => create({ client_user_id: unique('parallel') })));
      assert.deepEqual(answers.map((r) => r.statusCode), Array(10).fill(200));
      assert.equal(await total(), n + 10);
      const page = (await get(`/v2/user/?offset=${n}&limit=10`)).json();
      assert.deepEqual(page.users.map((u: { user_id: string }) => u.user_id).sort(), answers.map((r) => r.json().user_id).sort());
    });
  });

  describe('client_user_id', () => {
    const refused: [string, unknown][] = [
      ['empty', ''],
      ['256 characters', 'x'.repeat(256)],
      ['a control character', 'abc\u0001def'],
      ['a newline', 'abc\ndef'],
      ['a tab', 'abc\tdef'],
      ['DEL', 'abc\u007f'],
      ['an e-mail address', 'jane.doe@example.com'],
      ['an international phone number', '+44 20 7946 0958'],
      ['a formatted phone number', '(555) 123-4567'],
      ['a dotted phone number', '555.123.4567'],
      ['a number, not a string', 12345],
      ['null', null],
      ['an object', { id: 'x' }],
    ];
    for (const [what, value] of refused) {
      it(`refuses ${what}`, async () => {
        assertRefused(await create({ client_user_id: value }), 'client_user_id');
      });
    }

    it('refuses a missing client_user_id', async () => {
      const res = await create({ fallback_time_zone: 'UTC' });
      assertRefused(res, 'client_user_id');
      assert.equal(res.json().detail[0].type, 'missing');
    });

    const allowed: [string, string][] = [
      ['plain digits', String(Date.now()).padEnd(16, '7')],
      ['255 characters', randomUUID() + 'y'.repeat(255 - 36)],
      ['a UUID', randomUUID()],
      ['unicode and punctuation', `ünï/cødé ${randomUUID()} #?&`],
      ['a single character', 'z'],
    ];
    for (const [what, value] of allowed) {
      it(`allows ${what}`, async () => {
        const res = await create({ client_user_id: value });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json().client_user_id, value);
        assert.equal(await usersNamed(value), 1);
      });
    }
  });

  describe('fallback_time_zone', () => {
    for (const zone of ['Europe/London', 'America/Argentina/Buenos_Aires', 'UTC']) {
      it(`accepts ${zone}`, async () => {
        const res = await create({ client_user_id: unique('tz'), fallback_time_zone: zone });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal((await get(`/v2/user/${res.json().user_id}`)).json().fallback_time_zone.id, zone);
      });
    }
    for (const zone of ['Mars/Olympus_Mons', 'Europe/Londn', '', 'Europe/London ', '+01:00', 'GMT+25', 'Europe/London/Extra/../../x']) {
      it(`refuses ${JSON.stringify(zone)}`, async () => {
        assertRefused(await create({ client_user_id: unique('tz'), fallback_time_zone: zone }), 'fallback_time_zone');
      });
    }
    it('refuses a non-string', async () => {
      assertRefused(await create({ client_user_id: unique('tz'), fallback_time_zone: 1 }), 'fallback_time_zone');
    });
  });

  describe('fallback_birth_date', () => {
    for (const date of ['1980-03-13', '2024-02-29', '1900-01-01', dayFromToday(-1)]) {
      it(`accepts ${date}`, async () => {
        const res = await create({ client_user_id: unique('bd'), fallback_birth_date: date });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal((await get(`/v2/user/${res.json().user_id}`)).json().fallback_birth_date.value, date);
      });
    }
    for (const date of ['2023-02-29', '2023-04-31', '2023-13-01', '1980-3-13', '13/03/1980', '1980-03-13T00:00:00Z', dayFromToday(2), dayFromToday(400), '']) {
      it(`refuses ${JSON.stringify(date)}`, async () => {
        assertRefused(await create({ client_user_id: unique('bd'), fallback_birth_date: date }), 'fallback_birth_date');
      });
    }
  });

  describe('ingestion_start and ingestion_end', () => {
    it('accepts a start before or equal to the end, and either alone', async () => {
      for (const body of [
        { ingestion_start: '2024-01-01', ingestion_end: '2024-01-02' },
        { ingestion_start: '2024-01-01', ingestion_end: '2024-01-01' },
        { ingestion_start: '2024-01-01' },
        { ingestion_end: '2030-01-01' },
      ]) {
        const res = await create({ client_user_id: unique('ing'), ...body });
        assert.equal(res.statusCode, 200, `${JSON.stringify(body)}: ${res.body}`);
      }
    });

    it('refuses a start after the end, and creates nothing', async () => {
      const clientUserId = unique('ing');
      assertRefused(await create({ client_user_id: clientUserId, ingestion_start: '2024-02-01', ingestion_end: '2024-01-31' }), 'ingestion_start');
      assert.equal(await usersNamed(clientUserId), 0);
    });

    it('refuses dates that are not YYYY-MM-DD calendar dates', async () => {
      assertRefused(await create({ client_user_id: unique('ing'), ingestion_start: '2023-02-29' }), 'ingestion_start');
      assertRefused(await create({ client_user_id: unique('ing'), ingestion_end: '2024/01/01' }), 'ingestion_end');
    });
  });

  describe('the body', () => {
    it('ignores unknown fields, as the upstream does: a team_id or user_id in the body changes nothing', async () => {
      const foreignTeam = randomUUID(), chosenId = randomUUID();
      const res = await create({ client_user_id: unique('extra'), team_id: foreignTeam, user_id: chosenId, colour: 'blue' });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().team_id, team.teamId);
      assert.notEqual(res.json().user_id, chosenId);
      assert.equal(res.json().colour, undefined);
    });

    it('refuses a body that is not a JSON object, as pydantic words it', async () => {
      for (const payload of ['[]', '"abc"', '42', 'null', '[{"client_user_id":"x"}]']) {
        const res = await create(payload, { headers: { 'content-type': 'application/json' } });
        assert.equal(res.statusCode, 422, payload);
        assert.deepEqual(res.json().detail, [{
          type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from',
          input: JSON.parse(payload),
        }], payload);
      }
    });

    it('accepts JSON sent with a charset parameter or in another letter case', async () => {
      for (const type of ['application/json; charset=utf-8', 'Application/JSON']) {
        const res = await create(JSON.stringify({ client_user_id: unique('ct') }), { headers: { 'content-type': type } });
        assert.equal(res.statusCode, 200, `${type}: ${res.body}`);
      }
    });

    it('refuses a wrong content type', async () => {
      const json = JSON.stringify({ client_user_id: unique('ct') });
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
        const res = await create(json, { headers: { 'content-type': type } });
        assert.equal(res.statusCode, 422, `${type}: ${res.body}`);
        assert.ok(Array.isArray(res.json().detail));
      }
    });

    it('refuses bodies that are not a JSON object', async () => {
      for (const body of ['{"client_user_id": ', 'not json', '', '[]', '"x"', '42', 'null']) {
        const res = await create(body, { headers: { 'content-type': 'application/json' } });
        assert.equal(res.statusCode, 422, `${JSON.stringify(body)}: ${res.body}`);
        assert.ok(Array.isArray(res.json().detail));
        assert.equal(res.json().detail[0].loc[0], 'body');
      }
    });

    it('takes a body of exactly 16 KiB and refuses one byte more with 413', async () => {
      const limit = 16 * 1024;
      const body = (clientUserId: string, size: number) => {
        const head = `{"client_user_id":${JSON.stringify(clientUserId)}`;
        return head + ' '.repeat(size - head.length - 1) + '}';
      };
      const fits = unique('big');
      const ok = await create(body(fits, limit), { headers: { 'content-type': 'application/json' } });
      assert.equal(ok.statusCode, 200, ok.body);
      const over = unique('big');
      const res = await create(body(over, limit + 1), { headers: { 'content-type': 'application/json' } });
      assert.equal(res.statusCode, 413);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(typeof res.json().detail, 'string');
      assert.equal(await usersNamed(over), 0);
    });
  });
});

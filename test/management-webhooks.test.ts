/**
 * Webhook endpoints over the Management API (contract sections 10 and 11):
 * every route's success and errors, another team's endpoint answered like a
 * missing one, the URL rules (https only; no loopback, private, link-local
 * or internal address, IPv4 or IPv6, as a literal or as a name resolves;
 * WEBHOOK_ALLOW_PRIVATE), filter_types, headers with sensitive values
 * hidden, the secret and its rotation with a 24-hour overlap.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import dns from 'node:dns';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { publicOnlyLookup } from '../src/events/send.js';
import { EVENT_TYPES } from '../src/management/event-types.js';
import { endpointUrlProblem, isInternalAddress, type Lookup } from '../src/management/url-check.js';
import { signingSecrets } from '../src/management/webhook-store.js';
import { testApp, testSql } from './helpers.js';
import { allPages, DATE_TIME, manage, managementKey, UUID, type Management } from './management-helpers.js';
import { nameServer } from './webhook-helpers.js';

const SECRET = /^whsec_[A-Za-z0-9+/]{32}$/;
const PUBLIC_URL = 'https://93.184.216.34/hooks/health';

describe('Management API: webhook endpoints', () => {
  let sql: Sql;
  let app: App;
  let m: Management;
  let teamId: string;
  let otherTeamId: string;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    m = await managementKey(sql);
    teamId = (await manage(app, m.key, 'POST', `${m.base}/team`, { name: 'webhooks' })).json().id;
    otherTeamId = (await manage(app, m.key, 'POST', `${m.base}/team`, { name: 'other webhooks' })).json().id;
  });
  after(async () => {
    await app.close();
    await sql.end();
  });

  const list = (team = teamId) => `${m.base}/team/${team}/production/webhook`;
  const one = (id: string, team = teamId) => `${list(team)}/${id}`;
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object) => manage(app, m.key, method, url, payload);
  const create = async (payload: object, team = teamId) => {
    const res = await call('POST', list(team), payload);
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  };

  it('POST registers an endpoint with the defaults and a new secret; GET answers it', async () => {
    const webhook = await create({ url: PUBLIC_URL });
    assert.deepEqual(Object.keys(webhook), ['id', 'url', 'description', 'rate_limit', 'disabled', 'filter_types', 'created_at', 'updated_at']);
    assert.match(webhook.id, UUID);
    assert.deepEqual([webhook.url, webhook.description, webhook.rate_limit, webhook.disabled, webhook.filter_types], [PUBLIC_URL, '', null, false, null]);
    assert.match(webhook.created_at, DATE_TIME);
    assert.equal(webhook.updated_at, webhook.created_at);
    assert.deepEqual((await call('GET', one(webhook.id))).json(), webhook);
    const secret = (await call('GET', `${one(webhook.id)}/secret`)).json();
    assert.match(secret.key, SECRET);
    assert.equal(Buffer.from(secret.key.slice(6), 'base64').length, 24);

    const full = await create({
      url: 'https://[2606:4700:4700::1111]:8443/in', description: 'receiver', rate_limit: 20, disabled: true,
      filter_types: ['user.created', 'provider.connection.created'], secret: `whsec_${randomBytes(32).toString('base64')}`,
    });
    assert.deepEqual([full.description, full.rate_limit, full.disabled, full.filter_types], ['receiver', 20, true, ['user.created', 'provider.connection.created']]);
  });

  it('a secret given at creation is the endpoint\'s; one that is not whsec_ + base64 of 24 to 64 bytes is a 422', async () => {
    const chosen = `whsec_${randomBytes(24).toString('base64')}`;
    const webhook = await create({ url: PUBLIC_URL, secret: chosen });
    assert.equal((await call('GET', `${one(webhook.id)}/secret`)).json().key, chosen);
    for (const secret of ['secret', `whsec_${randomBytes(16).toString('base64')}`, `whsec_${randomBytes(65).toString('base64')}`, `whsec_${randomBytes(24).toString('base64url')}_-`, randomBytes(24).toString('base64')]) {
      const res = await call('POST', list(), { url: PUBLIC_URL, secret });
      assert.equal(res.statusCode, 422, secret);
      assert.deepEqual(res.json().detail[0].loc, ['body', 'secret']);
    }
  });

  it('filter_types must be event types of section 10: at least one, none twice; null means every type', async () => {
    assert.deepEqual((await create({ url: PUBLIC_URL, filter_types: [...EVENT_TYPES] })).filter_types, [...EVENT_TYPES]);
    assert.equal((await create({ url: PUBLIC_URL, filter_types: null })).filter_types, null);
    const cases: [unknown, string, (string | number)[]][] = [
      [['user.created', 'user.exploded'], 'enum', ['body', 'filter_types', '1']],
      [['daily.data.sleep.created'], 'enum', ['body', 'filter_types', '0']],
      [[], 'too_short', ['body', 'filter_types']],
      [['user.created', 'user.created'], 'value_error', ['body', 'filter_types']],
      ['user.created', 'array_type', ['body', 'filter_types']],
      [[7], 'string_type', ['body', 'filter_types', '0']],
    ];
    for (const [filter_types, type, loc] of cases) {
      const res = await call('POST', list(), { url: PUBLIC_URL, filter_types });
      assert.equal(res.statusCode, 422, JSON.stringify(filter_types));
      assert.equal(res.json().detail[0].type, type, JSON.stringify(filter_types));
      assert.deepEqual(res.json().detail[0].loc, loc, JSON.stringify(filter_types));
    }
    const patched = await create({ url: PUBLIC_URL });
    assert.equal((await call('PATCH', one(patched.id), { filter_types: ['nope'] })).statusCode, 422);
  });

  it('other bad values are a 422 at their place', async () => {
    const cases: [object, (string | number)[]][] = [
      [{}, ['body', 'url']],
      [{ url: '' }, ['body', 'url']],
      [{ url: PUBLIC_URL, rate_limit: 0 }, ['body', 'rate_limit']],
      [{ url: PUBLIC_URL, rate_limit: 'fast' }, ['body', 'rate_limit']],
      [{ url: PUBLIC_URL, disabled: 'yes' }, ['body', 'disabled']],
      [{ url: PUBLIC_URL, description: null }, ['body', 'description']],
      [{ url: `https://example.com/${'x'.repeat(2048)}` }, ['body', 'url']],
    ];
    for (const [payload, loc] of cases) {
      const res = await call('POST', list(), payload);
      assert.equal(res.statusCode, 422, JSON.stringify(payload).slice(0, 80));
      assert.deepEqual(res.json().detail[0].loc, loc);
    }
  });

  describe('endpoint URLs', () => {
    const refused = async (url: string) => {
      const res = await call('POST', list(), { url });
      assert.equal(res.statusCode, 422, `${url}: ${res.body}`);
      const [item] = res.json().detail;
      assert.deepEqual([item.type, item.loc, item.input], ['value_error', ['body', 'url'], url]);
      return item.msg as string;
    };

    it('https:// only, absolute, without credentials', async () => {
      assert.match(await refused('http://93.184.216.34/hook'), /https:\/\//);
      assert.match(await refused('ftp://93.184.216.34/hook'), /https:\/\//);
      assert.match(await refused('hooks.example.com/in'), /absolute/);
      assert.match(await refused('https://user:pass@93.184.216.34/hook'), /credentials/);
    });

    it('IPv4 literals: loopback, private, shared, link-local, unspecified, multicast and reserved are refused, in any notation', async () => {
      for (const host of ['127.0.0.1', '127.9.9.9', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1',
        '0.0.0.0', '224.0.0.1', '240.0.0.1', '255.255.255.255', '192.0.2.10', '198.18.0.1', '2130706433', '0x7f.1', '017700000001', '10.1']) {
        assert.match(await refused(`https://${host}/hook`), /internal address/, host);
      }
      for (const host of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '1.1.1.1:8443']) {
        assert.equal((await call('POST', list(), { url: `https://${host}/hook` })).statusCode, 200, host);
      }
    });

    it('IPv6 literals: loopback, unspecified, unique local, link-local, multicast and IPv4 embedded in internal ranges are refused', async () => {
      for (const host of ['::1', '::', '0:0:0:0:0:0:0:1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'fec0::1', 'ff02::1', '2001:db8::1',
        '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '64:ff9b::a00:1', '64:ff9b::7f00:1', '2002:c0a8:101::1', '::127.0.0.1', '100::1']) {
        assert.match(await refused(`https://[${host}]/hook`), /internal address/, host);
      }
      for (const host of ['2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808']) {
        assert.equal((await call('POST', list(), { url: `https://[${host}]/hook` })).statusCode, 200, host);
      }
    });

    it('names: localhost and its subdomains are refused; a name that does not resolve is accepted', async () => {
      for (const host of ['localhost', 'LOCALHOST', 'localhost.', 'api.localhost', 'localhost:8443']) {
        assert.match(await refused(`https://${host}/hook`), /internal address/, host);
      }
      // .invalid never resolves (RFC 6761): accepted now, checked again at each delivery.
      assert.equal((await call('POST', list(), { url: 'https://hooks.example.invalid/in' })).statusCode, 200);
    });

    it('a name is judged by every address it resolves to now (DNS, or the resolver given)', async () => {
      const resolver = (answers: Record<string, string[] | Error>): Lookup => async (name) => {
        const answer = answers[name];
        if (answer === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
        if (answer instanceof Error) throw answer;
        return answer;
      };
      const lookup = resolver({
        'public.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
        'internal.example': ['10.0.0.7'],
        'mixed.example': ['93.184.216.34', 'fd00::7'],
        'metadata.example': ['169.254.169.254'],
        'mapped.example': ['::ffff:127.0.0.1'],
        'broken.example': Object.assign(new Error('server failure'), { code: 'ESERVFAIL' }),
      });
      const policy = { allowPrivate: false, lookup };
      assert.equal(await endpointUrlProblem('https://public.example/in', policy), undefined);
      for (const name of ['internal.example', 'mixed.example', 'metadata.example', 'mapped.example']) {
        assert.match(String(await endpointUrlProblem(`https://${name}/in`, policy)), new RegExp(`${name} resolves to`), name);
      }
      assert.equal(await endpointUrlProblem('https://unknown.example/in', policy), undefined, 'does not resolve: accepted');
      assert.equal(await endpointUrlProblem('https://broken.example/in', policy), undefined, 'does not resolve now: accepted');
      const never: Lookup = () => new Promise(() => {});
      assert.equal(await endpointUrlProblem('https://slow.example/in', { allowPrivate: false, lookup: never, lookupTimeoutMs: 50 }), undefined,
        'a lookup that never answers counts as not resolving');
      assert.equal(await endpointUrlProblem('https://internal.example/in', { allowPrivate: true, lookup }), undefined);
      assert.equal(isInternalAddress('not an address'), true);
    });

    it('a name is looked up in DNS as each delivery looks it up (the same name server, no hosts file)', async () => {
      // Before, registration asked the system's resolver and delivery asked DNS: a name could pass one and fail the other.
      const server = await nameServer({ 'public.example': '93.184.216.34', 'inside.example': '10.1.2.3' });
      const servers = dns.promises.getServers();
      dns.promises.setServers([server.address]);
      try {
        assert.equal((await call('POST', list(), { url: 'https://public.example/in' })).statusCode, 200);
        assert.match(await refused('https://inside.example/in'), /inside\.example resolves to 10\.1\.2\.3/);
        const delivery = await new Promise((resolve) => {
          publicOnlyLookup('inside.example', { all: true }, (err: NodeJS.ErrnoException | null) => resolve(err?.code));
        });
        assert.equal(delivery, 'EINTERNALADDRESS', 'delivery refuses the same name');
      } finally {
        await server.close();
        dns.promises.setServers(servers);
      }
    });

    it('WEBHOOK_ALLOW_PRIVATE=true accepts http:// and internal addresses (local development), still no credentials', async () => {
      const open = await testApp(sql, { WEBHOOK_ALLOW_PRIVATE: 'true' });
      try {
        for (const url of ['http://localhost:3000/hook', 'https://127.0.0.1/hook', 'http://[::1]:8080/', 'https://10.0.0.5/in']) {
          const res = await manage(open, m.key, 'POST', list(), { url });
          assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
        }
        assert.equal((await manage(open, m.key, 'POST', list(), { url: 'ftp://localhost/' })).statusCode, 422);
        assert.equal((await manage(open, m.key, 'POST', list(), { url: 'http://a:b@localhost/' })).statusCode, 422);
      } finally {
        await open.close();
      }
    });

    it('PATCH checks a new URL as registration does', async () => {
      const webhook = await create({ url: PUBLIC_URL });
      const res = await call('PATCH', one(webhook.id), { url: 'https://localhost/evil' });
      assert.equal(res.statusCode, 422);
      assert.deepEqual(res.json().detail[0].loc, ['body', 'url']);
      assert.equal((await call('GET', one(webhook.id))).json().url, PUBLIC_URL, 'unchanged');
    });
  });

  it('PATCH changes the fields given, keeps the rest, never the secret; {} answers it as it is', async () => {
    const webhook = await create({ url: PUBLIC_URL, rate_limit: 5, filter_types: ['user.created'] });
    const secret = (await call('GET', `${one(webhook.id)}/secret`)).json().key;
    const res = await call('PATCH', one(webhook.id), { description: 'changed', disabled: true, rate_limit: null, secret: `whsec_${randomBytes(24).toString('base64')}` });
    assert.equal(res.statusCode, 200, res.body);
    const changed = res.json();
    assert.deepEqual({ ...changed, updated_at: undefined }, { ...webhook, description: 'changed', disabled: true, rate_limit: null, updated_at: undefined });
    assert.ok(Date.parse(changed.updated_at) >= Date.parse(webhook.updated_at));
    assert.equal((await call('GET', `${one(webhook.id)}/secret`)).json().key, secret, 'PATCH never changes the secret');
    const cleared = (await call('PATCH', one(webhook.id), { filter_types: null, url: 'https://93.184.216.35/new' })).json();
    assert.deepEqual([cleared.filter_types, cleared.url], [null, 'https://93.184.216.35/new']);
    const same = await call('PATCH', one(webhook.id), {});
    assert.deepEqual([same.statusCode, same.json()], [200, cleared]);
  });

  it('DELETE: 204, then it is gone with its secrets', async () => {
    const webhook = await create({ url: PUBLIC_URL });
    const res = await call('DELETE', one(webhook.id));
    assert.deepEqual([res.statusCode, res.body], [204, '']);
    const gone = await call('GET', one(webhook.id));
    assert.deepEqual([gone.statusCode, gone.json()], [404, { detail: 'Webhook endpoint not found' }]);
    assert.equal((await sql`SELECT 1 FROM webhook_secrets WHERE endpoint_id = ${webhook.id}`).length, 0);
    assert.equal((await call('DELETE', one(webhook.id))).statusCode, 404);
  });

  it('another team\'s endpoint answers exactly like a missing one, on every route; an unknown team is a 404 too', async () => {
    const theirs = await create({ url: PUBLIC_URL }, otherTeamId);
    const routes: ['GET' | 'PATCH' | 'DELETE' | 'PUT' | 'POST', string, object?][] = [
      ['GET', ''], ['PATCH', '', { disabled: true }], ['PATCH', '', {}], ['DELETE', ''], ['GET', '/headers'], ['PUT', '/headers', { headers: { a: 'b' } }],
      ['GET', '/secret'], ['POST', '/secret/rotate', {}],
    ];
    for (const [method, suffix, body] of routes) {
      const stolen = await call(method, `${one(theirs.id)}${suffix}`, body);
      const missing = await call(method, `${one(randomUUID())}${suffix}`, body);
      assert.deepEqual([stolen.statusCode, stolen.json()], [404, { detail: 'Webhook endpoint not found' }], `${method} ${suffix}`);
      assert.equal(stolen.body, missing.body);
    }
    assert.deepEqual((await call('GET', one(theirs.id, otherTeamId))).json(), theirs, 'untouched');
    const listed = (await call('GET', list())).json().data.map((w: { id: string }) => w.id);
    assert.ok(!listed.includes(theirs.id), 'not in the other team\'s list');
    for (const [method, url, body] of [['GET', list(randomUUID())], ['POST', list(randomUUID()), { url: PUBLIC_URL }], ['GET', one(randomUUID(), randomUUID())]] as const) {
      const res = await call(method, url, body);
      assert.deepEqual([res.statusCode, res.json()], [404, { detail: 'Team not found' }], `${method} ${url}`);
    }
    assert.equal((await call('GET', one('not-a-uuid'))).statusCode, 422);
  });

  it('GET lists a team\'s endpoints oldest first, paged by cursor; a cursor of another team\'s list is a 422', async () => {
    const team = (await call('POST', `${m.base}/team`, { name: 'paged webhooks' })).json().id;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ url: `${PUBLIC_URL}/${i}` }, team)).id);
    const pages = await allPages(app, m.key, `${list(team)}?limit=2`);
    assert.deepEqual(pages.map((p) => p.data.length), [2, 2, 1]);
    assert.deepEqual(pages.flatMap((p) => p.data.map((w: { id: string }) => w.id)), ids);
    const cursor = pages[0]!.next_cursor as string;
    const foreign = await call('GET', `${list()}?next_cursor=${encodeURIComponent(cursor)}`);
    assert.equal(foreign.statusCode, 422);
    assert.deepEqual(foreign.json().detail[0].loc, ['query', 'next_cursor']);
    assert.equal((await call('GET', `${list(team)}?limit=251`)).statusCode, 422);
    const empty = (await call('POST', `${m.base}/team`, { name: 'no webhooks' })).json().id;
    assert.deepEqual((await call('GET', list(empty))).json(), { data: [], next_cursor: null });
  });

  describe('headers', () => {
    it('PUT replaces them; GET hides the values of sensitive ones and lists their names', async () => {
      const webhook = await create({ url: PUBLIC_URL });
      const empty = await call('GET', `${one(webhook.id)}/headers`);
      assert.deepEqual([empty.statusCode, empty.json()], [200, { headers: {}, sensitive: [] }]);
      const headers = {
        Authorization: 'Bearer s3cr3t-value', Cookie: 'session=abc', 'X-Api-Key': 'k-123', 'X-Client-Secret': 'cs', 'X-Auth-Token': 't',
        'X-Environment': 'production', 'X-Tenant': 'acme',
      };
      const put = await call('PUT', `${one(webhook.id)}/headers`, { headers });
      assert.deepEqual([put.statusCode, put.body], [204, '']);
      const shown = await call('GET', `${one(webhook.id)}/headers`);
      assert.equal(shown.statusCode, 200);
      assert.deepEqual(shown.json(), {
        headers: { 'X-Environment': 'production', 'X-Tenant': 'acme' },
        sensitive: ['Authorization', 'Cookie', 'X-Api-Key', 'X-Auth-Token', 'X-Client-Secret'],
      });
      for (const value of ['s3cr3t-value', 'session=abc', 'k-123']) assert.ok(!shown.body.includes(value));
      const [stored] = await sql<{ headers: Record<string, string> }[]>`SELECT headers FROM webhook_endpoints WHERE endpoint_id = ${webhook.id}`;
      assert.deepEqual(stored!.headers, headers, 'kept for the delivery');
      await call('PUT', `${one(webhook.id)}/headers`, { headers: { 'X-Only': '1' } });
      assert.deepEqual((await call('GET', `${one(webhook.id)}/headers`)).json(), { headers: { 'X-Only': '1' }, sensitive: [] });
    });

    it('refuses names that are not tokens, set by the delivery, given twice, values with line breaks, and more than 20', async () => {
      const webhook = await create({ url: PUBLIC_URL });
      const cases: [unknown, (string | number)[]][] = [
        [{ 'bad name': 'x' }, ['body', 'headers', 'bad name']],
        [{ 'Content-Type': 'text/plain' }, ['body', 'headers', 'Content-Type']],
        [{ 'webhook-signature': 'v1,x' }, ['body', 'headers', 'webhook-signature']],
        [{ 'Svix-Id': 'msg_1' }, ['body', 'headers', 'Svix-Id']],
        [{ Host: 'evil.example' }, ['body', 'headers', 'Host']],
        [{ 'X-A': '1', 'x-a': '2' }, ['body', 'headers', 'x-a']],
        [{ 'X-Split': 'a\r\nX-Injected: 1' }, ['body', 'headers', 'X-Split']],
        [{ 'X-Long': 'x'.repeat(4097) }, ['body', 'headers', 'X-Long']],
        [{ 'X-Number': 7 }, ['body', 'headers', 'X-Number']],
        [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])), ['body', 'headers']],
        ['not an object', ['body', 'headers']],
      ];
      for (const [headers, loc] of cases) {
        const res = await call('PUT', `${one(webhook.id)}/headers`, { headers });
        assert.equal(res.statusCode, 422, JSON.stringify(headers).slice(0, 60));
        assert.deepEqual(res.json().detail.at(-1).loc, loc, JSON.stringify(headers).slice(0, 60));
      }
      assert.equal((await call('PUT', `${one(webhook.id)}/headers`, {})).statusCode, 422);
      assert.deepEqual((await call('GET', `${one(webhook.id)}/headers`)).json(), { headers: {}, sensitive: [] }, 'nothing was saved');
    });
  });

  describe('secret', () => {
    it('rotation: a new current secret at once, the old one signing beside it for 24 hours', async () => {
      const webhook = await create({ url: PUBLIC_URL });
      const first = (await call('GET', `${one(webhook.id)}/secret`)).json().key;
      assert.deepEqual(await signingSecrets(sql, teamId, webhook.id), [first]);
      // No body at all is an empty one.
      const rotated = await app.inject({ method: 'POST', url: `${one(webhook.id)}/secret/rotate`, headers: { 'x-management-key': m.key } });
      const rotatedAt = Date.now();
      assert.deepEqual([rotated.statusCode, rotated.body], [204, '']);
      const second = (await call('GET', `${one(webhook.id)}/secret`)).json().key;
      assert.match(second, SECRET);
      assert.notEqual(second, first);
      assert.deepEqual(await signingSecrets(sql, teamId, webhook.id), [second, first], 'both sign during the overlap');
      const [old] = await sql<{ expires_at: Date }[]>`SELECT expires_at FROM webhook_secrets WHERE endpoint_id = ${webhook.id} AND secret = ${first}`;
      const overlapMs = old!.expires_at.getTime() - rotatedAt;
      assert.ok(Math.abs(overlapMs - 24 * 3600_000) < 60_000, `the old secret expires ${overlapMs} ms after the rotation`);

      const chosen = `whsec_${randomBytes(32).toString('base64')}`;
      assert.equal((await call('POST', `${one(webhook.id)}/secret/rotate`, { key: chosen })).statusCode, 204);
      assert.equal((await call('GET', `${one(webhook.id)}/secret`)).json().key, chosen);
      assert.deepEqual(await signingSecrets(sql, teamId, webhook.id), [chosen, second, first]);
      // Once its overlap is over, an old secret signs no more, and the next rotation removes it.
      await sql`UPDATE webhook_secrets SET expires_at = now() - interval '1 second' WHERE endpoint_id = ${webhook.id} AND secret = ${first}`;
      assert.deepEqual(await signingSecrets(sql, teamId, webhook.id), [chosen, second]);
      await call('POST', `${one(webhook.id)}/secret/rotate`, {});
      assert.equal((await sql`SELECT 1 FROM webhook_secrets WHERE endpoint_id = ${webhook.id} AND secret = ${first}`).length, 0);
      assert.equal((await signingSecrets(sql, teamId, webhook.id)).length, 3);
    });

    it('a rotation to a key that is not a secret is a 422 and changes nothing', async () => {
      const webhook = await create({ url: PUBLIC_URL });
      const before = (await call('GET', `${one(webhook.id)}/secret`)).json().key;
      for (const key of ['whsec_short', 'plain', 7]) {
        const res = await call('POST', `${one(webhook.id)}/secret/rotate`, { key });
        assert.equal(res.statusCode, 422, String(key));
        assert.deepEqual(res.json().detail[0].loc, ['body', 'key']);
      }
      assert.equal((await call('GET', `${one(webhook.id)}/secret`)).json().key, before);
      assert.deepEqual(await signingSecrets(sql, teamId, webhook.id), [before]);
    });
  });
});

/** GET /v2/user/providers/{user_id} and DELETE /v2/user/{user_id}/{provider}: contract section 8. */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { documentDrifts } from '../src/writes/stored-documents.js';
import { importUsers } from '../src/import/import.js';
import { appWithTwoTeams, callAs, canonicalTimes, comparableHeaders, lines, withSortedSources, type TeamWithUsers } from './helpers.js';

const GONE = { detail: 'The user does not or no longer exists in this team' };
const NOT_CONNECTED = { detail: 'Provider not connected' };

/** Sources of this file only (the catalogue is shared by every test file): unique slugs. */
const tag = randomBytes(4).toString('hex');
const sourceNamed = (letter: string) => ({ name: `Providers test ${letter}`, slug: `prv_${tag}_${letter}`, logo: `https://example.com/prv/${letter}.png` });

/** An import record of `teamId` with the given connections. */
function record(teamId: string, links: { created_on: string; source: { name: string; slug: string; logo: string } }[]): Record<string, any> {
  return {
    user_id: randomUUID(), team_id: teamId, client_user_id: `prv-${randomUUID()}`, created_on: '2024-03-01T10:00:00+00:00',
    connected_sources: links, fallback_time_zone: null, fallback_birth_date: null, ingestion_start: null, ingestion_end: null,
  };
}

/** The providers answer a user's record should give: its links in the contract's order. */
function expectedProviders(user: Record<string, any>): Record<string, unknown>[] {
  return withSortedSources(user).connected_sources.map((cs: { created_on: string; source: { name: string; slug: string; logo: string } }) => ({
    name: cs.source.name, slug: cs.source.slug, logo: cs.source.logo, created_on: cs.created_on,
    status: 'connected', external_user_id: null, error_details: null, resource_availability: {},
  }));
}

describe('providers and deregister', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;
  const used = new Set<string>();

  // Generated users have 0 to 4 sources at random: teams big enough that each file's picks below always find theirs.
  appWithTwoTeams(120, 30, (f) => ({ sql, app, team, other } = f));

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key = team.key, payload?: object) =>
    callAs(app, key, method, url, payload);
  const providers = (userId: string, key = team.key) => call('GET', `/v2/user/providers/${userId}`, key);
  const deregister = (userId: string, slug: string, key = team.key) => call('DELETE', `/v2/user/${userId}/${slug}`, key);
  /**
   * An imported user of the team with at least `n` sources, not used by
   * another test: the one with the fewest such, so that picks of one source
   * do not use up the users with several.
   */
  const userWith = (n: number, of: TeamWithUsers = team) => {
    const user = of.users
      .filter((u) => u.connected_sources.length >= n && !used.has(u.user_id))
      .reduce<Record<string, any> | undefined>((best, u) => (best && best.connected_sources.length <= u.connected_sources.length ? best : u), undefined);
    assert.ok(user, `a generated user with ${n} sources`);
    used.add(user.user_id);
    return user;
  };
  const links = async (userId: string) =>
    (await sql<{ slug: string }[]>`SELECT s.slug FROM user_sources us JOIN sources s USING (source_id) WHERE us.user_id = ${userId} ORDER BY s.slug`).map((r) => r.slug);
  const docMatchesReference = async (userId: string) => {
    return (await documentDrifts(sql, { userIds: [userId] })).length === 0;
  };

  describe('GET /v2/user/providers/{user_id}', () => {
    it("answers the user's connected sources with their status, in connected_sources order", async () => {
      let checked = 0;
      for (const user of team.users.filter((u) => u.connected_sources.length > 0).slice(0, 15)) {
        const res = await providers(user.user_id);
        assert.equal(res.statusCode, 200, res.body);
        assert.match(String(res.headers['content-type']), /^application\/json/);
        const body = res.json();
        assert.deepEqual(Object.keys(body), ['providers']);
        assert.deepEqual(canonicalTimes(body.providers), canonicalTimes(expectedProviders(user)));
        for (const p of body.providers) {
          assert.deepEqual(Object.keys(p), ['name', 'slug', 'logo', 'created_on', 'status', 'external_user_id', 'error_details', 'resource_availability']);
        }
        // The same order and times as GET shows.
        const got = (await call('GET', `/v2/user/${user.user_id}`)).json();
        assert.deepEqual(body.providers.map((p: { slug: string; created_on: string }) => [p.slug, p.created_on]),
          got.connected_sources.map((cs: { source: { slug: string }; created_on: string }) => [cs.source.slug, cs.created_on]));
        checked++;
      }
      assert.ok(checked >= 5, `only ${checked} generated users with sources`);
    });

    it('answers {"providers": []} for a user without connections', async () => {
      const created = await call('POST', '/v2/user/', team.key, { client_user_id: `prv-none-${randomUUID()}` });
      const res = await providers(created.json().user_id);
      assert.deepEqual([res.statusCode, res.json()], [200, { providers: [] }]);
    });

    it('orders by connection time, then slug, whatever the order in the import file', async () => {
      const [a, b, c] = [sourceNamed('a'), sourceNamed('b'), sourceNamed('c')];
      const user = record(team.teamId, [
        { created_on: '2024-05-01T00:00:00+00:00', source: c },
        { created_on: '2024-04-01T12:00:00.5+00:00', source: b },
        { created_on: '2024-04-01T12:00:00.5+00:00', source: a },
        { created_on: '2024-04-01T12:00:00.25+00:00', source: { name: 'Oura', slug: 'oura', logo: 'https://storage.example.com/providers/oura.png' } },
      ]);
      await importUsers(sql, lines([user]));
      const res = await providers(user.user_id);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json().providers.map((p: { slug: string }) => p.slug), ['oura', a.slug, b.slug, c.slug]);
      assert.deepEqual(canonicalTimes(res.json().providers), canonicalTimes(expectedProviders(user)));
    });

    it("answers an unknown user, another team's user and a user scheduled for deletion with the same 404", async () => {
      const unknown = await providers(randomUUID());
      const foreign = await providers(userWith(1, other).user_id);
      assert.deepEqual([unknown.statusCode, unknown.json()], [404, GONE]);
      assert.deepEqual([foreign.statusCode, foreign.json()], [404, GONE]);
      assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
      const victim = userWith(1);
      assert.equal((await call('DELETE', `/v2/user/${victim.user_id}`)).statusCode, 200);
      const scheduled = await providers(victim.user_id);
      assert.deepEqual([scheduled.statusCode, scheduled.json()], [404, GONE]);
    });

    it('answers a malformed user_id with 422 at path.user_id', async () => {
      const res = await providers('not-a-uuid');
      assert.equal(res.statusCode, 422, res.body);
      assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['path', 'user_id']]);
    });

    it('wants a key', async () => {
      const res = await app.inject({ url: `/v2/user/providers/${team.users[0]!.user_id}` });
      assert.equal(res.statusCode, 401);
    });
  });

  describe('DELETE /v2/user/{user_id}/{provider}', () => {
    it('removes that connection only: from providers, from GET, from the list and from user_sources', async () => {
      const user = userWith(2);
      const before = (await call('GET', `/v2/user/${user.user_id}`)).json();
      const beforeProviders = (await providers(user.user_id)).json().providers;
      const slug = before.connected_sources[0].source.slug as string;
      const res = await deregister(user.user_id, slug);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { success: true });

      const after = (await call('GET', `/v2/user/${user.user_id}`)).json();
      assert.deepEqual(after, { ...before, connected_sources: before.connected_sources.slice(1) });
      assert.deepEqual((await providers(user.user_id)).json().providers, beforeProviders.slice(1));
      const expectedSlugs = before.connected_sources.slice(1).map((cs: { source: { slug: string } }) => cs.source.slug).sort();
      assert.deepEqual(await links(user.user_id), expectedSlugs, 'the row in user_sources is gone, the others kept');
      assert.equal(await docMatchesReference(user.user_id), true, 'users.doc is the document its columns make');
      const listed = (await call('GET', '/v2/user/?limit=500')).json().users.find((u: { user_id: string }) => u.user_id === user.user_id);
      assert.deepEqual(listed, after);
    });

    it('the list read before the deregister is not served again', async () => {
      const user = userWith(1);
      const page = '/v2/user/?offset=0&limit=500';
      await call('GET', page);
      await call('GET', page);
      const slug = withSortedSources(user).connected_sources[0].source.slug as string;
      assert.equal((await deregister(user.user_id, slug)).statusCode, 200);
      const listed = (await call('GET', page)).json().users.find((u: { user_id: string }) => u.user_id === user.user_id);
      assert.ok(!listed.connected_sources.some((cs: { source: { slug: string } }) => cs.source.slug === slug));
    });

    it('removes a middle and a last connection, and the very last one', async () => {
      const user = userWith(3);
      const slugs = withSortedSources(user).connected_sources.map((cs: { source: { slug: string } }) => cs.source.slug) as string[];
      for (const slug of [slugs[1]!, slugs.at(-1)!, ...slugs.filter((s, i) => i !== 1 && i !== slugs.length - 1)]) {
        assert.equal((await deregister(user.user_id, slug)).statusCode, 200, slug);
        const remaining = (await providers(user.user_id)).json().providers.map((p: { slug: string }) => p.slug);
        assert.ok(!remaining.includes(slug));
        assert.deepEqual(remaining, slugs.filter((s) => remaining.includes(s)), 'still in order');
        assert.equal(await docMatchesReference(user.user_id), true);
      }
      assert.deepEqual((await providers(user.user_id)).json(), { providers: [] });
      assert.deepEqual(await links(user.user_id), []);
    });

    it('answers 404 "Provider not connected" for a known source the user has not connected, and a second deregister', async () => {
      const user = userWith(1);
      const connected = new Set(user.connected_sources.map((cs: { source: { slug: string } }) => cs.source.slug));
      const upstreamOnly = ['garmin', 'oura', 'fitbit', 'whoop', 'withings', 'polar'].find((s) => !connected.has(s))!;
      // A source in the catalogue (an import added it) that this user has not connected.
      const catalogued = sourceNamed('z');
      await importUsers(sql, lines([record(team.teamId, [{ created_on: '2024-01-01T00:00:00+00:00', source: catalogued }])]));
      for (const slug of [upstreamOnly, catalogued.slug]) {
        const res = await deregister(user.user_id, slug);
        assert.deepEqual([res.statusCode, res.json()], [404, NOT_CONNECTED], slug);
      }
      const slug = user.connected_sources[0].source.slug as string;
      assert.equal((await deregister(user.user_id, slug)).statusCode, 200);
      const again = await deregister(user.user_id, slug);
      assert.deepEqual([again.statusCode, again.json()], [404, NOT_CONNECTED]);
    });

    it('answers 422 at path.provider for a slug that names no source', async () => {
      const user = userWith(1);
      const before = await links(user.user_id);
      for (const slug of ['no_such_source_xyz', `nothing_${tag}`]) {
        const res = await deregister(user.user_id, slug);
        assert.equal(res.statusCode, 422, res.body);
        assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['path', 'provider']], res.body);
      }
      assert.deepEqual(await links(user.user_id), before);
    });

    it("answers 404 for an unknown user and another team's user alike, and removes nothing of the other team", async () => {
      const theirs = userWith(1, other);
      const slug = theirs.connected_sources[0].source.slug as string;
      const unknown = await deregister(randomUUID(), slug);
      const foreign = await deregister(theirs.user_id, slug);
      assert.deepEqual([unknown.statusCode, unknown.json()], [404, GONE]);
      assert.deepEqual([foreign.statusCode, foreign.json()], [404, GONE]);
      assert.deepEqual(comparableHeaders(foreign.headers), comparableHeaders(unknown.headers));
      assert.ok((await links(theirs.user_id)).includes(slug), "the other team's connection is kept");
      assert.equal((await providers(theirs.user_id, other.key)).json().providers.length, theirs.connected_sources.length);
    });

    it('answers 404 for a user scheduled for deletion', async () => {
      const victim = userWith(1);
      const slug = victim.connected_sources[0].source.slug as string;
      assert.equal((await call('DELETE', `/v2/user/${victim.user_id}`)).statusCode, 200);
      const res = await deregister(victim.user_id, slug);
      assert.equal(res.statusCode, 404, res.body);
    });

    it('answers a malformed user_id with 422 at path.user_id', async () => {
      const res = await deregister('not-a-uuid', 'oura');
      assert.equal(res.statusCode, 422, res.body);
      assert.deepEqual(res.json().detail.map((i: { loc: string[] }) => i.loc), [['path', 'user_id']]);
    });

    it('the team metrics lose the connection', async () => {
      const user = userWith(1);
      const metrics = async () => (await call('GET', '/v2/user/metrics')).json().number_of_connected_sources as number;
      const before = await metrics();
      assert.equal((await deregister(user.user_id, user.connected_sources[0].source.slug)).statusCode, 200);
      assert.equal(await metrics(), before - 1);
      const [row] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${team.teamId}`;
      assert.equal(await metrics(), row!.n);
    });

    it('concurrent deregisters of one connection: exactly one succeeds', async () => {
      const user = userWith(1);
      const slug = user.connected_sources[0].source.slug as string;
      const answers = await Promise.all(Array.from({ length: 5 }, () => deregister(user.user_id, slug)));
      assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 404, 404, 404, 404]);
      const [row] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM user_sources us JOIN users u USING (user_id) WHERE u.team_id = ${team.teamId}`;
      assert.equal((await call('GET', '/v2/user/metrics')).json().number_of_connected_sources, row!.n);
    });
  });
});

/** DELETE /v2/user/{user_id}, undo_delete and the purge: contract section 8. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { registerWebhook } from '../src/management/webhooks.js';
import { purgeDeletedUsers } from '../src/users/deletion.js';
import { callAs, appWithTwoTeams, teamWithKey, until, type TeamWithUsers, type TestTeam } from './helpers.js';

describe('DELETE /v2/user/{user_id}, undo and purge', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  appWithTwoTeams(40, 5, (f) => ({ sql, app, team, other } = f));

  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, key = team.key) =>
    callAs(app, key, method, url, payload);
  const listIds = async (key = team.key) => {
    const res = await call('GET', '/v2/user/?limit=500', undefined, key);
    return { ids: res.json().users.map((u: { user_id: string }) => u.user_id) as string[], total: res.json().total as number };
  };
  const undo = (query: string, key = team.key) => call('POST', `/v2/user/undo_delete?${query}`, undefined, key);
  const withSources = () => team.users.find((u) => u.connected_sources.length > 0 && !deleted.has(u.user_id))!;
  const deleted = new Set<string>();
  const del = async (userId: string, key = team.key) => {
    const res = await call('DELETE', `/v2/user/${userId}`, undefined, key);
    if (res.statusCode === 200) deleted.add(userId);
    return res;
  };

  it('answers 200 {"success": true}; at once the user leaves the list and the total, and loses its connections', async () => {
    const victim = withSources();
    const before = await listIds();
    const res = await del(victim.user_id);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { success: true });
    const now = await listIds();
    assert.equal(now.total, before.total - 1);
    assert.deepEqual(now.ids, before.ids.filter((id) => id !== victim.user_id));
    const links = await sql`SELECT 1 FROM user_sources WHERE user_id = ${victim.user_id}`;
    assert.equal(links.length, 0, 'its connections are removed at once');
  });

  it('then answers each route as the upstream does for a user scheduled for deletion', async () => {
    const victim = team.users.find((u) => !deleted.has(u.user_id))!;
    await del(victim.user_id);
    assert.deepEqual([(await call('GET', `/v2/user/${victim.user_id}`)).statusCode, (await call('GET', `/v2/user/${victim.user_id}`)).json()],
      [404, { detail: 'You have scheduled this user for deletion.' }]);
    const scheduled = { detail: 'The user has been scheduled for deletion as per your previous request' };
    for (const res of [await del(victim.user_id), await call('PATCH', `/v2/user/${victim.user_id}`, { fallback_time_zone: 'UTC' })]) {
      assert.deepEqual([res.statusCode, res.json()], [404, scheduled]);
    }
    const resolved = await call('GET', `/v2/user/resolve/${encodeURIComponent(victim.client_user_id)}`);
    assert.deepEqual([resolved.statusCode, resolved.json()], [404, { detail: 'User not found' }]);
    const providers = await call('GET', `/v2/user/providers/${victim.user_id}`);
    assert.deepEqual([providers.statusCode, providers.json()], [404, { detail: 'The user does not or no longer exists in this team' }]);
  });

  it("answers an unknown user and another team's alike, and deletes nothing of the other team", async () => {
    const gone = { detail: 'The user does not or no longer exists in this team' };
    const unknown = await del(randomUUID());
    const foreign = await del(other.users[0]!.user_id);
    assert.deepEqual([unknown.statusCode, unknown.json()], [404, gone]);
    assert.deepEqual([foreign.statusCode, foreign.json()], [404, gone]);
    assert.equal((await listIds(other.key)).total, other.users.length);
    // Nor can the other team undo a deletion of ours.
    const mine = [...deleted][0]!;
    assert.equal((await undo(`user_id=${mine}`, other.key)).statusCode, 404);
  });

  it('frees the client_user_id at once: a new user may take it, and then undo is refused with 409', async () => {
    const victim = team.users.find((u) => !deleted.has(u.user_id))!;
    await del(victim.user_id);
    const taken = await call('POST', '/v2/user/', { client_user_id: victim.client_user_id });
    assert.equal(taken.statusCode, 200, taken.body);
    const refused = await undo(`user_id=${victim.user_id}`);
    assert.deepEqual([refused.statusCode, refused.json()], [409, { detail: 'Client user id already exists' }]);
    assert.equal((await call('GET', `/v2/user/${victim.user_id}`)).statusCode, 404, 'still scheduled');
    // Once the new holder is deleted, the old user comes back.
    await del(taken.json().user_id);
    assert.equal((await undo(`user_id=${victim.user_id}`)).statusCode, 200);
    deleted.delete(victim.user_id);
  });

  it('undo restores the user as it was, at its place in the list, without its connections', async () => {
    const victim = withSources();
    const before = await listIds();
    const doc = (await call('GET', `/v2/user/${victim.user_id}`)).json();
    await del(victim.user_id);
    const res = await undo(`user_id=${victim.user_id}`);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { success: true });
    deleted.delete(victim.user_id);
    assert.deepEqual(await listIds(), before, 'the same list, in the same order');
    const restored = (await call('GET', `/v2/user/${victim.user_id}`)).json();
    assert.deepEqual(restored, { ...doc, connected_sources: [] });
    // Restored by client_user_id too.
    await del(victim.user_id);
    assert.equal((await undo(`client_user_id=${encodeURIComponent(victim.client_user_id)}`)).statusCode, 200);
    deleted.delete(victim.user_id);
    assert.equal((await call('GET', `/v2/user/${victim.user_id}`)).statusCode, 200);
  });

  it('undo wants exactly one of user_id and client_user_id, and a user scheduled under it', async () => {
    for (const query of ['', `user_id=${team.users[0]!.user_id}&client_user_id=x`]) {
      const res = await undo(query);
      assert.equal(res.statusCode, 422, query);
      assert.deepEqual(res.json().detail[0].loc, ['query']);
    }
    assert.deepEqual((await undo('user_id=not-a-uuid')).json().detail[0].loc, ['query', 'user_id']);
    const live = team.users.find((u) => !deleted.has(u.user_id))!;
    for (const query of [`user_id=${randomUUID()}`, `user_id=${live.user_id}`, 'client_user_id=never-deleted']) {
      assert.equal((await undo(query)).statusCode, 404, query);
    }
  });

  it('purges after the grace period: no table or column of the schema holds the user any more, its events and messages included', async () => {
    const fresh: TestTeam = await teamWithKey(sql, 'purge');
    // An endpoint, so that the user's events have messages (its URL never resolves, and no dispatcher runs here).
    const endpoint = await registerWebhook(sql, fresh.teamId, { url: 'https://hooks.example.invalid/purge' }, { allowPrivate: false });
    assert.ok(typeof endpoint === 'object' && 'webhook' in endpoint);
    const created = await call('POST', '/v2/user/', { client_user_id: `purge-${randomUUID()}`, fallback_time_zone: 'UTC' }, fresh.key);
    const userId = created.json().user_id as string;
    // A connection, as an import would have made it, and one connected over the API.
    await sql`INSERT INTO sources (slug, name, logo) VALUES ('purge_test', 'Purge test', 'https://example.com/p.png') ON CONFLICT DO NOTHING`;
    await sql`INSERT INTO user_sources (user_id, source_id, created_on) SELECT ${userId}, source_id, now() FROM sources WHERE slug = 'purge_test'`;
    assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: userId, provider: 'oura' }, fresh.key)).statusCode, 200);
    assert.equal((await call('PATCH', `/v2/user/${userId}`, { fallback_time_zone: 'Europe/Paris' }, fresh.key)).statusCode, 204);
    assert.equal((await del(userId, fresh.key)).statusCode, 200);

    // The purge is of the whole database: other test files' aged users may go in it, never this one.
    const early: string[] = [];
    await purgeDeletedUsers(sql, 3_600_000, (users) => early.push(...users.map((u) => u.user_id)));
    assert.ok(!early.includes(userId), 'within the grace period the user is not purged');
    assert.equal((await undo(`user_id=${userId}`, fresh.key)).statusCode, 200, 'and it can still be undone');
    assert.equal((await del(userId, fresh.key)).statusCode, 200);

    const events = (await sql<{ event_id: string }[]>`SELECT event_id FROM events WHERE user_id = ${userId}`).map((e) => e.event_id);
    const messagesOf = async () => (await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM webhook_messages WHERE event_id = ANY(${events}::uuid[])`)[0]!.n;
    // Created, connected, updated, its 2 connections deleted and itself deleted, restored, deleted.
    assert.equal(events.length, 8);
    assert.equal(await messagesOf(), 8);
    await sql`UPDATE webhook_messages SET status = 'failed', attempts = 8, last_attempt_at = now(), last_status_code = 500 WHERE event_id = ${events[0]!}`;

    // Its grace period over, in a transaction that purges it: no other test file's purge sees it aged, and one
    // that holds the purge's lock at that moment (it then purges nothing here) is waited for.
    const purged: string[] = [];
    await sql.begin(async (tx) => {
      await tx`UPDATE deleted_users SET deleted_at = now() - interval '2 hours' WHERE user_id = ${userId}`;
      await until('the user purged', 10_000, async () => {
        await purgeDeletedUsers(tx as unknown as Sql, 3_600_000, (users) => purged.push(...users.map((u) => u.user_id)));
        return purged.includes(userId);
      });
    });
    assert.deepEqual(await columnsHolding(sql, [userId, ...events]), [], 'no row holds the user or its events any more');
    assert.equal(await messagesOf(), 0, 'its messages and their attempts are deleted');
    assert.equal((await undo(`user_id=${userId}`, fresh.key)).statusCode, 404, 'a purged user cannot be restored');
  });
});

/**
 * Every column of the public schema's tables whose text holds one of `values`, as
 * `table.column: value`: one scan per table, one aggregate per column and value (a scan per
 * column and value took a minute once the other test files had filled the database).
 */
async function columnsHolding(sql: Sql, values: string[]): Promise<string[]> {
  const columns = await sql<{ table_name: string; column_name: string }[]>`
    SELECT c.table_name, c.column_name FROM information_schema.columns c
    JOIN information_schema.tables t USING (table_schema, table_name)
    WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
    ORDER BY c.table_name, c.ordinal_position`;
  const tables = new Map<string, string[]>();
  for (const { table_name, column_name } of columns) tables.set(table_name, [...(tables.get(table_name) ?? []), column_name]);
  const found: string[] = [];
  for (const [table, names] of tables) {
    const checks = names.flatMap((column) => values.map((value) => ({ column, value })));
    const holds = checks.map(({ column, value }, i) => sql`coalesce(bool_or(${sql(column)}::text LIKE ${`%${value}%`}), false) AS ${sql(`h${i}`)}`);
    const [row] = await sql<Record<string, boolean>[]>`SELECT ${holds.reduce((all, h) => sql`${all}, ${h}`)} FROM ${sql(table)}`;
    for (const [i, { column, value }] of checks.entries()) if (row![`h${i}`]) found.push(`${table}.${column}: ${value}`);
  }
  return found;
}

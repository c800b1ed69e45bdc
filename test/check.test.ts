/**
 * `hds check`: a recount of every team's kept state from its users
 * (src/users/recount.ts). It agrees after every kind of write the service
 * makes, and names the team and what differs after a write made behind the
 * service's back, exiting non-zero.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { App } from '../src/app.js';
import type { Sql } from '../src/db/client.js';
import { recountTeams } from '../src/users/recount.js';
import { callAs, runHds, teamWithUsers, testApp, testSql, type TeamWithUsers } from './helpers.js';

/** `hds check` as an operator runs it. */
const hdsCheck = (args: string[]) => runHds(['check', ...args]);

describe('hds check', () => {
  let sql: Sql;
  let app: App;
  let team: TeamWithUsers;
  let other: TeamWithUsers;

  before(async () => {
    sql = testSql();
    app = await testApp(sql);
    [team, other] = [await teamWithUsers(sql, 600), await teamWithUsers(sql, 50)];
  });
  after(async () => {
    await app?.close();
    await sql?.end();
  });

  it('agrees with what the service kept through creates, patches, deletes, undos, demo connections, disconnections and a purge', async () => {
    const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: object) => callAs(app, team.key, method, url, body);
    const withSources = team.users.filter((u, i) => u.connected_sources.length > 0 && i !== 0 && i !== 300);
    for (let i = 0; i < 5; i++) assert.equal((await call('POST', '/v2/user/', { client_user_id: `check-${i}-${Date.now()}` })).statusCode, 200);
    assert.equal((await call('PATCH', `/v2/user/${team.users[1]!.user_id}`, { fallback_time_zone: 'Europe/Paris' })).statusCode, 204);
    for (const u of [team.users[0]!, team.users[300]!, withSources[0]!]) assert.equal((await call('DELETE', `/v2/user/${u.user_id}`)).statusCode, 200);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${team.users[300]!.user_id}`)).statusCode, 200);
    const link = withSources[1]!;
    assert.equal((await call('DELETE', `/v2/user/${link.user_id}/${link.connected_sources[0].source.slug}`)).statusCode, 200);
    // Demo connections (users not touched above), one of them disconnected again, one of a user then deleted and restored.
    const [demo, restored] = [team.users[500]!.user_id, team.users[501]!.user_id];
    for (const provider of ['oura', 'fitbit', 'apple_health_kit', 'freestyle_libre']) {
      assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: demo, provider })).statusCode, 200);
    }
    assert.equal((await call('DELETE', `/v2/user/${demo}/fitbit`)).statusCode, 200);
    assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: restored, provider: 'oura' })).statusCode, 200);
    assert.equal((await call('DELETE', `/v2/user/${restored}`)).statusCode, 200);
    assert.equal((await call('POST', `/v2/user/undo_delete?user_id=${restored}`)).statusCode, 200);
    assert.equal((await call('POST', '/v2/link/connect/demo', { user_id: restored, provider: 'freestyle_libre' })).statusCode, 200);
    const { teams, drifts } = await recountTeams(sql, [team.teamId, other.teamId]);
    assert.equal(teams, 2);
    assert.deepEqual(drifts, []);
    const run = await hdsCheck(['--team', team.teamId]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^checked 1 team: every kept value agrees with a recount of the users$/m);
  });

  it('names the team and what differs after a user row is deleted by hand, and exits 1', async () => {
    const victim = other.users.find((u) => u.connected_sources.length > 0)!;
    // Behind the service's back: the row goes, and nothing it keeps for the team follows.
    await sql`DELETE FROM users WHERE user_id = ${victim.user_id}`;
    const { drifts } = await recountTeams(sql, [team.teamId, other.teamId]);
    assert.ok(drifts.every((d) => d.team_id === other.teamId), JSON.stringify(drifts));
    const what = drifts.map((d) => d.what);
    assert.deepEqual(drifts.find((d) => d.what === 'user_count'), { team_id: other.teamId, what: 'user_count', kept: '50', counted: '49' });
    assert.deepEqual(drifts.find((d) => d.what === 'connected_sources')?.counted,
      String(other.users.reduce((n, u) => n + u.connected_sources.length, 0) - victim.connected_sources.length));
    assert.ok(what.includes('list_holes buckets miscounted'), what.join(', '));
    assert.ok(what.some((w) => w.startsWith('team_source_weeks ')), what.join(', '));

    const run = await hdsCheck(['--team', other.teamId]);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout, new RegExp(`^team ${other.teamId}: user_count: kept 50, counted 49$`, 'm'));
    assert.match(run.stderr, /1 of 1 team differ from a recount of their users/);
    // The other team is still as kept: a check of it alone passes.
    const untouched = await hdsCheck(['--team', team.teamId]);
    assert.equal(untouched.code, 0, untouched.stdout + untouched.stderr);
  });

  it('names a block whose bucket thresholds are wrong although its count is right', async () => {
    // The first test left two of the team's users deleted: holes in its first buckets. One threshold off by one, a page would start off.
    const moved = await sql`
      UPDATE list_hole_blocks SET bucket_starts[64] = bucket_starts[64] + 1
      WHERE team_id = ${team.teamId} AND block = 1 AND holes > 0`;
    assert.equal(moved.count, 1);
    const { drifts } = await recountTeams(sql, [team.teamId]);
    assert.deepEqual(drifts.map((d) => [d.team_id, d.what]), [[team.teamId, 'list_hole_blocks miscounted']]);
    await sql`UPDATE list_hole_blocks SET bucket_starts[64] = bucket_starts[64] - 1 WHERE team_id = ${team.teamId} AND block = 1`;
    assert.deepEqual((await recountTeams(sql, [team.teamId])).drifts, []);
  });

  it('names a team whose block thresholds are wrong', async () => {
    const moved = await sql`UPDATE list_hole_teams SET block_starts[2] = block_starts[2] + 1 WHERE team_id = ${team.teamId}`;
    assert.equal(moved.count, 1);
    const { drifts } = await recountTeams(sql, [team.teamId]);
    assert.deepEqual(drifts.map((d) => [d.team_id, d.what]), [[team.teamId, 'list_hole_teams miscounted']]);
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { ROOT } from './helpers.js';

/** Several independent mistakes at once, and the words each problem must name. */
const BAD_ENV: Record<string, string> = {
  PORT: 'eighty',
  DB_POOL_MAX: '0',
  LOG_LEVEL: 'loud',
  REDIS_URL: 'http://127.0.0.1:6379',
  DATABASE_URL: 'mysql://db/x',
  METRICS_PORT: '70000',
  CORS_ORIGINS: 'not an origin',
  DEMO_SEED: 'maybe',
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return err.problems;
  }
  return assert.fail('loadConfig accepted a bad environment');
}

describe('configuration', () => {
  it('the defaults load', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8000);
    assert.equal(config.metricsPort, undefined);
    assert.equal(config.databaseUrl, undefined);
  });

  it('one error lists every problem, each naming its variable', () => {
    const problems = problemsOf(BAD_ENV);
    assert.equal(problems.length, Object.keys(BAD_ENV).length, problems.join('\n'));
    for (const name of Object.keys(BAD_ENV)) {
      assert.ok(problems.some((p) => p.startsWith(`${name} `)), `a problem names ${name}: ${problems.join(' | ')}`);
    }
    const message = new ConfigError(problems).message;
    for (const p of problems) assert.ok(message.includes(p));
  });

  it('each value is checked on its own', () => {
    assert.equal(problemsOf({ PORT: '-1' }).length, 1);
    assert.equal(problemsOf({ KEY_CACHE_TTL_MS: '5000' }).length, 1);
    assert.equal(problemsOf({ DATABASE_READ_URLS: 'postgres://replica/x' }).length, 1, 'replicas need a primary');
    assert.equal(problemsOf({ WORKERS: 'lots' }).length, 1);
  });

  it('the server refuses to start on a bad environment, printing every problem, before touching any database', () => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...BAD_ENV };
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'server.ts')], {
      cwd: ROOT, env, encoding: 'utf8', timeout: 30_000,
    });
    assert.equal(run.status, 2, `exit status (stderr: ${run.stderr})`);
    // Exactly the one message: nothing was started before it (no database, no listener).
    assert.equal(run.stderr, `hds: ${new ConfigError(problemsOf(BAD_ENV)).message}\n`);
    assert.match(run.stderr, /^hds: invalid configuration:\n {2}- /);
    assert.equal(run.stdout, '');
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
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
    // /metrics on its own listener, on the loopback, by default.
    assert.equal(config.metricsPort, 9464);
    assert.equal(config.metricsHost, '127.0.0.1');
    assert.deepEqual(config.trustProxy, [], 'no proxy trusted');
    assert.equal(config.authFailuresPerIp, 50);
    assert.equal(config.databaseUrl, undefined);
  });

  it('an empty variable counts as unset', () => {
    const config = loadConfig({ PORT: '', HOST: '', DATABASE_URL: '', METRICS_PORT: '', WORKERS: '', CORS_ORIGINS: '', DEMO_SEED: '' });
    assert.deepEqual(config, loadConfig({}));
  });

  it('derives what the code uses from what the variable says', () => {
    assert.equal(loadConfig({}).pageCacheBytes, 8 * 1024 * 1024);
    assert.equal(loadConfig({ PAGE_CACHE_MB: '3' }).pageCacheBytes, 3 * 1024 * 1024);
    assert.equal(loadConfig({}).dataDir, path.resolve('.data'));
    assert.equal(loadConfig({ DATA_DIR: 'x/y' }).dataDir, path.resolve('x/y'));
    assert.equal(loadConfig({ WORKERS: 'auto' }).workers, os.availableParallelism());
    assert.equal(loadConfig({ WORKERS: '3' }).workers, 3);
    assert.equal(loadConfig({ METRICS_PORT: '9100' }).metricsPort, 9100);
    assert.equal(loadConfig({ DEMO_SEED: 'no' }).demoSeed, false);
    const lists = loadConfig({
      DATABASE_URL: 'postgres://primary/x',
      DATABASE_READ_URLS: ' postgres://r1/x, ,postgresql://r2/x',
      CORS_ORIGINS: 'https://a.example.com, http://b.example.com:8080',
    });
    assert.deepEqual(lists.databaseReadUrls, ['postgres://r1/x', 'postgresql://r2/x']);
    assert.deepEqual(lists.corsOrigins, ['https://a.example.com', 'http://b.example.com:8080']);
  });

  it('says what is wrong, with the value given', () => {
    assert.deepEqual(problemsOf(BAD_ENV).sort(), [
      'CORS_ORIGINS entries must be origins like https://app.example.com, got "not an origin"',
      'DATABASE_URL must use postgres: or postgresql:, got mysql:',
      'DB_POOL_MAX must be between 1 and 1000, got 0',
      'DEMO_SEED must be true or false, got "maybe"',
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
      'METRICS_PORT must be between 0 and 65535, got 70000',
      'PORT must be a whole number, got "eighty"',
      'REDIS_URL must use redis: or rediss:, got http:',
    ]);
    assert.deepEqual(problemsOf({ DATABASE_URL: 'postgres://p/x', DATABASE_READ_URLS: 'nope' }), ['DATABASE_READ_URLS is not a valid URL']);
    assert.deepEqual(problemsOf({ WORKERS: 'lots' }), ['WORKERS must be a whole number, got "lots"']);
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

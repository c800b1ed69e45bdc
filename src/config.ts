import path from 'node:path';
import os from 'node:os';

/** Everything the process reads from its environment, parsed once and validated as a whole. */
export interface Config {
  port: number;
  host: string;
  /** Unset means: run the embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined;
  /** Read replicas; reads go there, writes and confirmations to the primary. */
  databaseReadUrls: string[];
  dataDir: string;
  logLevel: string;
  dbPoolMax: number;
  dbStatementTimeoutMs: number;
  dbConnectTimeoutS: number;
  /** How long a verified key may be served from memory; revocation is seen within this. */
  keyCacheTtlMs: number;
  /** Memory for list pages served again while their team is unchanged (src/users/page-cache.ts); 0 turns it off. */
  pageCacheBytes: number;
  redisUrl: string | undefined;
  /** Prepended to every Redis key, so several deployments (or tests) can share one Redis. */
  redisKeyPrefix: string;
  rateLimitPerTeam: number;
  rateLimitPerIp: number;
  rateLimitWindowS: number;
  corsOrigins: string[];
  metricsPort: number | undefined;
  workers: number;
  shutdownGraceMs: number;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxHeaderBytes: number;
  /** Seed a demo team on the first start of an empty embedded database. */
  demoSeed: boolean;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

type Env = Record<string, string | undefined>;

/** Parses `env`; throws one ConfigError listing every problem found. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];

  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (!/^\d+$/.test(raw.trim())) {
      problems.push(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
      return fallback;
    }
    const value = Number(raw);
    if (value < min || value > max) {
      problems.push(`${name} must be between ${min} and ${max}, got ${value}`);
      return fallback;
    }
    return value;
  };
  const url = (name: string, value: string, schemes: string[]): string => {
    try {
      const parsed = new URL(value);
      if (!schemes.includes(parsed.protocol)) problems.push(`${name} must use ${schemes.join(' or ')}, got ${parsed.protocol}`);
    } catch {
      problems.push(`${name} is not a valid URL`);
    }
    return value;
  };
  const list = (name: string): string[] =>
    (env[name] ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (['1', 'true', 'yes'].includes(raw)) return true;
    if (['0', 'false', 'no'].includes(raw)) return false;
    problems.push(`${name} must be true or false, got ${JSON.stringify(raw)}`);
    return fallback;
  };

  const pgSchemes = ['postgres:', 'postgresql:'];
  const databaseUrl = env.DATABASE_URL ? url('DATABASE_URL', env.DATABASE_URL, pgSchemes) : undefined;
  const databaseReadUrls = list('DATABASE_READ_URLS').map((u) => url('DATABASE_READ_URLS', u, pgSchemes));
  if (databaseReadUrls.length > 0 && !databaseUrl) problems.push('DATABASE_READ_URLS needs DATABASE_URL (the primary)');
  const redisUrl = env.REDIS_URL ? url('REDIS_URL', env.REDIS_URL, ['redis:', 'rediss:']) : undefined;

  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  const logLevel = env.LOG_LEVEL || 'info';
  if (!levels.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${levels.join(', ')}, got ${JSON.stringify(logLevel)}`);

  let workers = 1;
  if (env.WORKERS === 'auto') workers = os.availableParallelism();
  else workers = int('WORKERS', 1, 1, 256);

  const metricsPortRaw = env.METRICS_PORT;
  const metricsPort = metricsPortRaw ? int('METRICS_PORT', 0, 1, 65535) : undefined;

  const corsOrigins = list('CORS_ORIGINS');
  for (const origin of corsOrigins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) problems.push(`CORS_ORIGINS entries must be origins like https://app.example.com, got ${JSON.stringify(origin)}`);
  }

  const config: Config = {
    port: int('PORT', 8000, 0, 65535),
    host: env.HOST || '0.0.0.0',
    databaseUrl,
    databaseReadUrls,
    dataDir: path.resolve(env.DATA_DIR || '.data'),
    logLevel,
    dbPoolMax: int('DB_POOL_MAX', 10, 1, 1000),
    dbStatementTimeoutMs: int('DB_STATEMENT_TIMEOUT_MS', 5000, 1, 600_000),
    // 1 s: a request should never wait much longer than that on a database that does not answer.
    dbConnectTimeoutS: int('DB_CONNECT_TIMEOUT_S', 1, 1, 60),
    keyCacheTtlMs: int('KEY_CACHE_TTL_MS', 500, 0, 1000),
    pageCacheBytes: int('PAGE_CACHE_MB', 8, 0, 4096) * 1024 * 1024,
    redisUrl,
    redisKeyPrefix: env.REDIS_KEY_PREFIX || 'hds:',
    rateLimitPerTeam: int('RATE_LIMIT_PER_TEAM', 6000, 1, 10_000_000),
    rateLimitPerIp: int('RATE_LIMIT_PER_IP', 12000, 1, 10_000_000),
    rateLimitWindowS: int('RATE_LIMIT_WINDOW_S', 60, 1, 86_400),
    corsOrigins,
    metricsPort,
    workers,
    shutdownGraceMs: int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    requestTimeoutMs: int('REQUEST_TIMEOUT_MS', 10_000, 100, 600_000),
    headersTimeoutMs: int('HEADERS_TIMEOUT_MS', 5_000, 100, 600_000),
    keepAliveTimeoutMs: int('KEEP_ALIVE_TIMEOUT_MS', 5_000, 100, 600_000),
    maxHeaderBytes: int('MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    demoSeed: bool('DEMO_SEED', true),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

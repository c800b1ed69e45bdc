import path from 'node:path';
import os from 'node:os';
import { Kind, KindGuard, Type, type StaticDecode, type StaticEncode, type TInteger, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/*
 * The configuration is this one schema: the Config type, the parser (loadConfig) and
 * the README's table (checked by test/config-readme.test.ts) all come from it, so a
 * variable, default or bound cannot be changed in one of them only.
 *
 * Each field is a TypeBox schema of the value as written in the environment, with
 * JSON Schema's own keywords where they fit (default, minimum, maximum, enum, pattern,
 * description) and two of ours: `env`, the variable's name, and `schemes`, the URL
 * schemes a URL may use. A field whose value the code wants in another form (bytes,
 * an absolute path, a core count) is a Type.Transform from what the variable says.
 */

/** Keywords that every field carries; `description` is the README's Meaning cell. */
interface FieldKeywords {
  env: string;
  description: string;
  default?: string | number | boolean;
}

/** The keywords of a field; throws for a field not built by the helpers below, at import, not at first use. */
function keywordsOf(schema: TSchema): FieldKeywords {
  const { env, description, default: fallback } = schema;
  if (typeof env !== 'string' || typeof description !== 'string') throw new Error(`a config field lacks env or description: ${JSON.stringify(schema)}`);
  return { env, description, ...(fallback === undefined ? {} : { default: fallback as FieldKeywords['default'] }) };
}

const int = (env: string, o: { default?: number; minimum: number; maximum: number; description: string }) =>
  Type.Integer({ env, ...o });
const string = (env: string, o: { default: string; description: string }) => Type.String({ env, ...o });
const oneOf = (env: string, values: readonly string[], o: { default: string; description: string }) =>
  // Type.String rather than a union of literals: Config.logLevel stays a plain string.
  Type.String({ env, enum: [...values], ...o });
const bool = (env: string, o: { default: boolean; description: string }) => Type.Boolean({ env, ...o });
// URLs are checked by loadConfig (TypeBox has no URL check without registering a format).
const url = (env: string, schemes: string[], o: { description: string }) => Type.String({ env, schemes, ...o });
/** Comma-separated values, each checked against `items`; unset is an empty list. */
const list = <T extends TSchema>(env: string, items: T, o: { description: string }) => Type.Array(items, { env, ...o });

/** A duration written `500ms`, `30s`, `15m`, `24h` or `7d`, in milliseconds. */
const duration = (env: string, o: { default: string; description: string }) =>
  Type.Transform(Type.String({ env, pattern: DURATION.source, mustBe: 'a duration such as 0s, 30m, 24h or 7d', ...o }))
    .Decode((text) => parseDuration(text)!).Encode((ms) => `${ms}ms`);
/** Comma-separated durations, in milliseconds. */
const durations = (env: string, o: { default: string; description: string }) =>
  Type.Transform(Type.String({ env, pattern: DURATIONS.source, mustBe: 'durations separated by commas, such as 5s,5m,30m', ...o }))
    .Decode((text) => text.split(',').map((d) => parseDuration(d)!)).Encode((ms) => ms.map((d) => `${d}ms`).join(','));

/** Unset means undefined rather than a default. */
const optional = <T extends TSchema>(field: T) => Type.Union([field, Type.Undefined()], keywordsOf(field));
/** A number that may also be written `auto`, which means `auto()`. */
const orAuto = (field: TInteger, auto: () => number) =>
  Type.Transform(Type.Union([Type.Literal('auto'), field], keywordsOf(field)))
    .Decode((value) => (typeof value === 'number' ? value : auto()))
    .Encode((value) => value);

const DURATION = /^(\d{1,6})(ms|[smhd])$/;
const DURATIONS = /^\s*\d{1,6}(?:ms|[smhd])\s*(?:,\s*\d{1,6}(?:ms|[smhd])\s*)*$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "90d", "24h", "30m", "10s", "10ms" to milliseconds; null when it is not such a duration. */
export function parseDuration(text: string): number | null {
  const m = DURATION.exec(text.trim());
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : null;
}

const PG_SCHEMES = ['postgres:', 'postgresql:'];
/** An IPv4 or IPv6 address, with an optional prefix length: what proxy-addr (Fastify's trustProxy) takes. */
const PROXY_ADDRESS = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)(?:\/\d{1,3})?$/;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** The upstream's environments and regions (its Management API's enums); a deployment is one of each. */
export const ENVIRONMENTS = ['production', 'sandbox'] as const;
export const REGIONS = ['us', 'eu'] as const;
const MB = 1024 * 1024;

/** Its properties are the Config fields, in the order of the README's table. */
export const ConfigSchema = Type.Object({
  port: int('PORT', { default: 8000, minimum: 0, maximum: 65535, description: 'HTTP port' }),
  host: string('HOST', { default: '0.0.0.0', description: 'address to listen on' }),
  databaseUrl: optional(url('DATABASE_URL', PG_SCHEMES, {
    description: 'PostgreSQL to use. Unset: run the embedded PostgreSQL in `DATA_DIR` (a demo team is created on its first start)',
  })),
  dataDir: Type.Transform(string('DATA_DIR', {
    default: './.data',
    description: 'embedded PostgreSQL\'s data directory (must be reachable by the `postgres` system user when running as root)',
  })).Decode((dir) => path.resolve(dir)).Encode((dir) => dir),
  demoSeed: bool('DEMO_SEED', {
    default: true,
    description: 'create the demo team on the first start of an empty embedded database (never with `DATABASE_URL`)',
  }),
  databaseReadUrls: list('DATABASE_READ_URLS', Type.String({ schemes: PG_SCHEMES }), {
    description: 'comma-separated read replicas; reads go there, writes to `DATABASE_URL`',
  }),
  dbPoolMax: int('DB_POOL_MAX', { default: 10, minimum: 1, maximum: 1000, description: 'connections of the request pool of each process (its webhook delivery thread opens 5 more)' }),
  dbStatementTimeoutMs: int('DB_STATEMENT_TIMEOUT_MS', {
    default: 5000, minimum: 1, maximum: 600_000,
    description: 'statement timeout of request queries (imports and migrations have none)',
  }),
  dbConnectTimeoutS: int('DB_CONNECT_TIMEOUT_S', {
    default: 1, minimum: 1, maximum: 60,
    description: 'connection timeout; with the database down, requests get 503 within about a second',
  }),
  dbFreezeTimeoutMs: int('DB_FREEZE_TIMEOUT_MS', {
    default: 1000, minimum: 200, maximum: 1500,
    description: 'the primary counts as frozen (processes stopped, packets dropped) once a probe, sent every quarter of this (at most every 250 ms), and every query of the pool have gone unanswered this long, not counting time the service\'s own event loop was stalled; its queries then fail at once with 503 until a probe is answered (at most 1500, so that a request gets its 503 within two seconds; docs/decisions/freeze-guard-threshold.md)',
  }),
  keyCacheTtlMs: int('KEY_CACHE_TTL_MS', {
    default: 500, minimum: 0, maximum: 1000,
    description: 'how long a verified key is trusted from memory (0–1000): a revoked key is refused everywhere within this',
  }),
  pageCacheBytes: Type.Transform(int('PAGE_CACHE_MB', {
    default: 8, minimum: 0, maximum: 4096,
    description: 'memory per process for list pages answered again while their team is unchanged (checked in PostgreSQL on every request); once it is full, a page is kept on its second read; 0 turns it off',
  })).Decode((mb) => mb * MB).Encode((bytes) => bytes / MB),
  redisUrl: optional(url('REDIS_URL', ['redis:', 'rediss:'], {
    description: 'Redis for rate limits shared by all instances; without it, or while it is unreachable (logged), each process counts in memory',
  })),
  redisKeyPrefix: string('REDIS_KEY_PREFIX', {
    default: 'hds:',
    description: 'prefix of the rate-limit keys in Redis (lets several deployments share one Redis)',
  }),
  rateLimitPerTeam: int('RATE_LIMIT_PER_TEAM', {
    default: 6000, minimum: 1, maximum: 10_000_000,
    description: 'requests per window per team, after authentication',
  }),
  rateLimitPerIp: int('RATE_LIMIT_PER_IP', {
    default: 12000, minimum: 1, maximum: 10_000_000,
    description: 'requests per window per client address, before authentication (bad keys count)',
  }),
  authFailuresPerIp: int('AUTH_FAILURES_PER_IP', {
    default: 50, minimum: 1, maximum: 10_000_000,
    description: 'failed authentications per window per client address; past them the address gets 429 for every request until its window ends, valid key or not, at no database or hashing cost',
  }),
  rateLimitWindowS: int('RATE_LIMIT_WINDOW_S', {
    default: 60, minimum: 1, maximum: 86_400,
    description: 'rate-limit window; it starts at a client\'s first request. Answers carry `RateLimit` and `RateLimit-Policy`; a refused one is 429 with `Retry-After`',
  }),
  corsOrigins: list('CORS_ORIGINS', Type.String({ pattern: '^https?://[^/\\s]+$', description: 'origins like https://app.example.com' }), {
    description: 'comma-separated allowed origins; CORS is off when unset',
  }),
  trustProxy: list('TRUST_PROXY', Type.String({ pattern: PROXY_ADDRESS.source, description: 'IP addresses or CIDR ranges like 10.0.0.0/8' }), {
    description: 'proxies (IP addresses or CIDR ranges, comma-separated) whose `X-Forwarded-For` is believed: the client address it gives is what per-address limits count and the request log records. Unset: trust nobody (the peer is the client)',
  }),
  metricsHost: string('METRICS_HOST', {
    default: '127.0.0.1',
    description: 'address of the `/metrics` listener. It needs no key and shows the Node version, the pool and per-status counts: keep it on the loopback or a private network; `0.0.0.0` exposes it to everyone who reaches the host',
  }),
  metricsPort: int('METRICS_PORT', {
    default: 9464, minimum: 0, maximum: 65535,
    description: 'port of the `/metrics` listener (Prometheus exporters\' convention; 0: any free port, logged). `/metrics` is never on the API port',
  }),
  workers: orAuto(int('WORKERS', {
    default: 1, minimum: 1, maximum: 256,
    description: 'worker processes sharing the port (`auto` = number of cores)',
  }), () => os.availableParallelism()),
  shutdownGraceMs: int('SHUTDOWN_GRACE_MS', {
    default: 10_000, minimum: 0, maximum: 600_000,
    description: 'the whole exit after SIGTERM/SIGINT fits in it: requests in flight finish, new ones get 503, the database is closed',
  }),
  requestTimeoutMs: int('REQUEST_TIMEOUT_MS', {
    default: 10_000, minimum: 100, maximum: 600_000,
    description: 'whole-request time limit',
  }),
  headersTimeoutMs: int('HEADERS_TIMEOUT_MS', {
    default: 5_000, minimum: 100, maximum: 600_000,
    description: 'time to receive the request headers (checked at least every second)',
  }),
  keepAliveTimeoutMs: int('KEEP_ALIVE_TIMEOUT_MS', {
    default: 5_000, minimum: 100, maximum: 600_000,
    description: 'idle keep-alive connection timeout',
  }),
  maxHeaderBytes: int('MAX_HEADER_BYTES', {
    default: 16_384, minimum: 1024, maximum: 1_048_576,
    description: 'request header size limit',
  }),
  deletionGraceMs: duration('DELETION_GRACE', {
    default: '7d',
    description: 'how long a deleted user can be restored with `undo_delete` before it is purged (every row that holds it deleted); `0s` purges at the next pass, which runs every minute',
  }),
  environment: oneOf('ENVIRONMENT', ENVIRONMENTS, {
    default: 'production',
    description: 'the deployment\'s environment in Management API paths (`production` or `sandbox`); a path naming the other one is a 404',
  }),
  region: oneOf('REGION', REGIONS, {
    default: 'us',
    description: 'the deployment\'s region in Management API paths and teams (`us` or `eu`); a path naming the other one is a 404',
  }),
  webhookAllowPrivate: bool('WEBHOOK_ALLOW_PRIVATE', {
    default: false,
    description: 'accept webhook endpoint URLs that are `http://` or that point at a loopback, private, link-local or otherwise internal address (local development, tests); never in production',
  }),
  webhookTimeoutMs: duration('WEBHOOK_TIMEOUT', {
    default: '15s',
    description: 'how long a webhook endpoint has to answer a delivery with a 2xx; later, or any other answer (a redirect too), is a failed attempt',
  }),
  webhookRetryScheduleMs: durations('WEBHOOK_RETRY_SCHEDULE', {
    default: '5s,5m,30m,2h,5h,10h,10h',
    description: 'the waits before each retry of a failed delivery, comma-separated (the upstream\'s schedule); after the last the message is `failed` (recover it through the Management API)',
  }),
  webhookDisableAfterMs: duration('WEBHOOK_DISABLE_AFTER', {
    default: '5d',
    description: 'a webhook endpoint whose every attempt has failed for this long is disabled (a 410 answer disables it at once)',
  }),
  eventRetentionMs: duration('EVENT_RETENTION', {
    default: '30d',
    description: 'how long events and their webhook messages are kept (for the messages list and recover); a message still pending is kept until it is delivered or failed',
  }),
  logLevel: oneOf('LOG_LEVEL', LOG_LEVELS, { default: 'info', description: '`fatal` … `trace`, or `silent`' }),
});

/** Everything the process reads from its environment, parsed once and validated as a whole. */
export type Config = StaticDecode<typeof ConfigSchema>;

const fields = Object.entries(ConfigSchema.properties).map(([key, schema]) => ({ key, schema, ...keywordsOf(schema) }));

/** One row of the README's configuration table; `default` is undefined for a variable that may be unset. */
export interface ConfigVariable {
  env: string;
  default: string | number | boolean | undefined;
  description: string;
}

export const CONFIG_VARIABLES: readonly ConfigVariable[] = fields.map((field) => ({
  env: field.env,
  default: field.default,
  description: field.description,
}));

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

type Env = Record<string, string | undefined>;

/**
 * The value `raw` stands for under `schema`, or undefined after reporting why it has
 * none. `subject` names the value in "must be" messages ("CORS_ORIGINS entries").
 */
function parse(schema: TSchema, name: string, raw: string, report: (problem: string) => void, subject = name): unknown {
  const mustBe = (what: string) => report(`${subject} must be ${what}, got ${JSON.stringify(raw)}`);
  if (KindGuard.IsUnion(schema)) {
    if (schema.anyOf.some((member) => KindGuard.IsLiteral(member) && member.const === raw)) return raw;
    const value = schema.anyOf.find((member) => !KindGuard.IsLiteral(member) && !KindGuard.IsUndefined(member));
    if (value === undefined) throw new Error(`${name}: a union needs one member that is neither a literal nor undefined`);
    return parse(value, name, raw, report, subject);
  }
  if (KindGuard.IsInteger(schema)) {
    if (!/^\d+$/.test(raw.trim())) return mustBe('a whole number');
    const value = Number(raw);
    const { minimum = -Infinity, maximum = Infinity } = schema;
    if (value < minimum || value > maximum) return report(`${subject} must be between ${minimum} and ${maximum}, got ${value}`);
    return value;
  }
  if (KindGuard.IsBoolean(schema)) {
    if (['1', 'true', 'yes'].includes(raw)) return true;
    if (['0', 'false', 'no'].includes(raw)) return false;
    return mustBe('true or false');
  }
  if (KindGuard.IsArray(schema)) {
    return raw.split(',').map((s) => s.trim()).filter((s) => s !== '')
      .map((entry) => parse(schema.items, name, entry, report, `${name} entries`));
  }
  if (KindGuard.IsString(schema)) {
    const { enum: choices, schemes, pattern, description, mustBe: what } = schema as { enum?: string[]; schemes?: string[]; pattern?: string; description?: string; mustBe?: string };
    if (choices && !choices.includes(raw)) return mustBe(`one of ${choices.join(', ')}`);
    if (pattern !== undefined && !new RegExp(pattern).test(raw)) return mustBe(what ?? description ?? `like /${pattern}/`);
    if (schemes) {
      let protocol: string;
      // A bad URL is still returned, so that DATABASE_URL=mysql://… with replicas is one
      // problem, not also "DATABASE_READ_URLS needs DATABASE_URL".
      try {
        protocol = new URL(raw).protocol;
      } catch {
        report(`${name} is not a valid URL`);
        return raw;
      }
      if (!schemes.includes(protocol)) report(`${name} must use ${schemes.join(' or ')}, got ${protocol}`);
    }
    return raw;
  }
  throw new Error(`${name}: loadConfig cannot read a ${String(schema[Kind])} schema`);
}

/** Parses `env`; throws one ConfigError listing every problem found. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const report = (problem: string) => void problems.push(problem);

  const written: Record<string, unknown> = {};
  for (const { key, schema, env: name, default: fallback } of fields) {
    const raw = env[name];
    // An empty variable counts as unset (`PORT= npm start`, an empty line in an env file).
    if (raw === undefined || raw === '') written[key] = KindGuard.IsArray(schema) ? [] : fallback;
    else written[key] = parse(schema, name, raw, report);
  }
  const values = written as StaticEncode<typeof ConfigSchema>;

  if (values.databaseReadUrls.length > 0 && !values.databaseUrl) problems.push('DATABASE_READ_URLS needs DATABASE_URL (the primary)');
  if (typeof values.webhookTimeoutMs === 'string' && parseDuration(values.webhookTimeoutMs) === 0) problems.push('WEBHOOK_TIMEOUT must be more than 0');

  if (problems.length > 0) throw new ConfigError(problems);
  // Checks `values` against the schema once more and applies the Transforms (PAGE_CACHE_MB to bytes, …).
  return Value.Decode(ConfigSchema, values);
}

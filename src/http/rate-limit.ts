import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Config } from '../config.js';
import { rateLimited } from '../errors.js';
import { MemoryStore, RedisStore, type Hit } from './rate-limit-store.js';
import { routePattern } from './route-pattern.js';

/** Probes and metrics answer orchestrators and scrapers; limiting them would get healthy instances restarted. */
const EXEMPT_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

interface Limit {
  scope: 'ip' | 'team';
  max: number;
  /** This policy's `RateLimit-Policy` item (IETF draft-ietf-httpapi-ratelimit-headers). */
  policy: string;
}

type Counter = (l: Limit, key: string) => Hit | Promise<Hit>;

/** The per-team limit: an onRequest hook for a scope whose requests are authenticated by an earlier hook. */
export type TeamLimitHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/**
 * Two fixed-window limits: per client address in a root onRequest hook,
 * which runs before the routes' authentication hook (so floods of bad keys
 * are limited too), and per team in the hook returned here, which the
 * authenticated scope adds after its authentication hook (src/users/routes.ts):
 * both run before the body is read. (The team limit was a preParsing hook
 * once: Fastify then builds a hook runner of closures for every request, for
 * this one check.) Every answer that was counted carries `RateLimit` and
 * `RateLimit-Policy`; one over the limit is a 429 with `Retry-After`.
 */
export async function registerRateLimit(app: FastifyInstance, config: Config): Promise<TeamLimitHook> {
  const windowMs = config.rateLimitWindowS * 1000;
  const limit = (scope: Limit['scope'], max: number): Limit =>
    ({ scope, max, policy: `"${scope}";q=${max};w=${config.rateLimitWindowS}` });
  const ip = limit('ip', config.rateLimitPerIp);
  const team = limit('team', config.rateLimitPerTeam);

  let count: Counter;
  if (config.redisUrl) {
    const redis = await RedisStore.open(config.redisUrl, `${config.redisKeyPrefix}rl:`, windowMs, new MemoryStore(windowMs), app.log);
    await redis.connected(1000);
    count = (l, key) => redis.hit(`${l.scope}:${key}`);
    app.addHook('onClose', async () => redis.close());
  } else {
    // A memory store per scope: the hot path looks up the address or team id as it is, no key string built.
    const memory = { ip: new MemoryStore(windowMs), team: new MemoryStore(windowMs) };
    count = (l, key) => memory[l.scope].hit(key);
  }
  const bothPolicies = `${ip.policy}, ${team.policy}`;

  /** Adds the headers for `l` (after the address's, for a team), and refuses the request once over the limit. */
  const apply = (l: Limit, hit: Hit, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const secondsLeft = Math.max(1, Math.ceil((hit.resetAt - Date.now()) / 1000));
    const item = `"${l.scope}";r=${Math.max(0, l.max - hit.count)};t=${secondsLeft}`;
    if (l === ip) {
      reply.header('ratelimit-policy', ip.policy);
      reply.header('ratelimit', item);
    } else {
      // The address was counted first (the root onRequest hook runs before authentication): append to its item.
      reply.header('ratelimit-policy', bothPolicies);
      reply.header('ratelimit', `${String(reply.getHeader('ratelimit'))}, ${item}`);
    }
    if (hit.count <= l.max) return done();
    app.metrics?.rateLimitRejections.inc({ scope: l.scope });
    done(rateLimited(secondsLeft));
  };

  const check = (l: Limit, key: string, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const hit = count(l, key);
    // The memory store answers synchronously: no promise on the hot path.
    if (hit instanceof Promise) hit.then((h) => apply(l, h, reply, done), done);
    else apply(l, hit, reply, done);
  };

  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (EXEMPT_ROUTES.has(routePattern(request) ?? '')) return done();
    check(ip, request.ip, reply, done);
  });
  return (request, reply, done) => {
    if (!request.caller) return done();
    check(team, request.caller.teamId, reply, done);
  };
}

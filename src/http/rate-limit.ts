import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Config } from '../config.js';
import { rateLimited } from '../errors/catalogue.js';
import { MemoryStore, RedisStore, type Hit, type WindowStore } from './rate-limit-store.js';
import { routePattern } from './fast-path/route-pattern.js';

/** Probes answer orchestrators; limiting them would get healthy instances restarted. */
const EXEMPT_ROUTES = new Set(['/healthz', '/readyz']);

interface Limit {
  scope: 'ip' | 'team' | 'auth';
  max: number;
  /** This policy's `RateLimit-Policy` item (IETF draft-ietf-httpapi-ratelimit-headers). */
  policy: string;
}

/** The per-team limit: an onRequest hook for a scope whose requests are authenticated by an earlier hook. */
export type TeamLimitHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

export interface RateLimits {
  limitTeam: TeamLimitHook;
  /** Counts a request that no hook saw (src/http/edge-answers.ts) against its address's budget. */
  countAddress(ip: string): void;
}

/**
 * Three fixed-window limits. Per client address, in a root onRequest hook
 * that runs before the routes' authentication hook: its failed
 * authentications (401s, counted when they are answered) and, once they
 * reach AUTH_FAILURES_PER_IP, every request of the address is refused until
 * that window ends, before its key is hashed or looked up, a valid one too;
 * then its requests (bad keys count). Per team, in the hook returned here,
 * which the authenticated scope adds after its authentication hook
 * (src/users/routes.ts). All run before the body is read. (The team limit was
 * a preParsing hook once: Fastify then builds a hook runner of closures for
 * every request, for this one check.) Every answer that was counted carries
 * `RateLimit` and `RateLimit-Policy`; one over a limit is a 429 with
 * `Retry-After`. The address is Fastify's `request.ip`: the peer, or with
 * TRUST_PROXY the client its trusted proxies name.
 */
export async function registerRateLimit(app: FastifyInstance, config: Config): Promise<RateLimits> {
  const windowMs = config.rateLimitWindowS * 1000;
  const limit = (scope: Limit['scope'], max: number): Limit =>
    ({ scope, max, policy: `"${scope}";q=${max};w=${config.rateLimitWindowS}` });
  const ip = limit('ip', config.rateLimitPerIp);
  const team = limit('team', config.rateLimitPerTeam);
  const auth = limit('auth', config.authFailuresPerIp);

  let stores: Record<Limit['scope'], WindowStore>;
  if (config.redisUrl) {
    const redis = await RedisStore.open(config.redisUrl, `${config.redisKeyPrefix}rl:`, windowMs, new MemoryStore(windowMs), app.log);
    await redis.connected(1000);
    stores = { ip: redis.scoped('ip:'), team: redis.scoped('team:'), auth: redis.scoped('auth:') };
    app.addHook('onClose', async () => redis.close());
  } else {
    // A memory store per scope: the hot path looks up the address or team id as it is, no key string built.
    stores = { ip: new MemoryStore(windowMs), team: new MemoryStore(windowMs), auth: new MemoryStore(windowMs) };
  }
  const bothPolicies = `${ip.policy}, ${team.policy}`;

  const refuse = (l: Limit, secondsLeft: number, done: HookHandlerDoneFunction) => {
    app.metrics?.rateLimitRejections.inc({ scope: l.scope });
    done(rateLimited(secondsLeft));
  };
  const secondsLeftOf = (hit: Hit) => Math.max(1, Math.ceil((hit.resetAt - Date.now()) / 1000));

  /** Adds the headers for `l` (after the address's, for a team), and refuses the request once over the limit. */
  const apply = (l: Limit, hit: Hit, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const secondsLeft = secondsLeftOf(hit);
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
    refuse(l, secondsLeft, done);
  };

  const check = (l: Limit, key: string, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const store = stores[l.scope];
    const hit = store.hitNow(key);
    if (hit) apply(l, hit, reply, done);
    else store.hit(key).then((h) => apply(l, h, reply, done), done);
  };

  /** An address whose failed authentications used up their budget is refused; any other is counted. */
  const gate = (failures: Hit | null, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (!failures || failures.count < auth.max) return check(ip, request.ip, reply, done);
    const secondsLeft = secondsLeftOf(failures);
    reply.header('ratelimit-policy', auth.policy);
    reply.header('ratelimit', `"auth";r=0;t=${secondsLeft}`);
    refuse(auth, secondsLeft, done);
  };

  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (EXEMPT_ROUTES.has(routePattern(request) ?? '')) return done();
    const failures = stores.auth.peekNow(request.ip);
    if (failures !== undefined) gate(failures, request, reply, done);
    else stores.auth.peek(request.ip).then((f) => gate(f, request, reply, done), done);
  });
  // A failed authentication is counted once it is answered (the key check's refusals, and any other 401).
  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (reply.statusCode === 401 && !stores.auth.hitNow(request.ip)) {
      stores.auth.hit(request.ip).catch((err: Error) => request.log.warn({ err: { message: err.message } }, 'could not count a failed authentication'));
    }
    done();
  });
  return {
    limitTeam: (request, reply, done) => {
      if (!request.caller) return done();
      check(team, request.caller.teamId, reply, done);
    },
    countAddress: (address) => {
      if (!stores.ip.hitNow(address)) void stores.ip.hit(address);
    },
  };
}

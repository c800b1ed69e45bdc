import type { Redis } from 'ioredis';
import { withinLoopTime } from '../loop-clock.js';

/** One counted request: how many the key has made in its window, and when that window ends. */
export interface Hit {
  count: number;
  resetAt: number;
}

/**
 * Counts requests per key in fixed windows. Two functions rather than one
 * returning a value or a promise: a count kept in this process is answered
 * at once, with no promise on the hot path, and no caller has to test which
 * of the two it got.
 */
export interface WindowStore {
  /** Counts a request of `key` and returns the window, or undefined when only hit() can count it (a shared store). */
  hitNow(key: string): Hit | undefined;
  /** Counts a request of `key` and returns the window. */
  hit(key: string): Promise<Hit>;
  /** The window of `key` without counting (null: none open), or undefined when only peek() can tell (a shared store). */
  peekNow(key: string): Hit | null | undefined;
  /** The window of `key` without counting; null when none is open. */
  peek(key: string): Promise<Hit | null>;
}

const MAX_MEMORY_KEYS = 100_000;

/**
 * Fixed windows kept in this process: a window starts at a key's first
 * request and lasts `windowMs`. Always answers at once.
 */
export class MemoryStore implements WindowStore {
  private readonly windows = new Map<string, Hit>();
  private nextSweep = 0;

  constructor(private readonly windowMs: number) {}

  async hit(key: string): Promise<Hit> {
    return this.hitNow(key);
  }

  async peek(key: string): Promise<Hit | null> {
    return this.peekNow(key);
  }

  peekNow(key: string, now = Date.now()): Hit | null {
    const entry = this.windows.get(key);
    return entry && entry.resetAt > now ? entry : null;
  }

  hitNow(key: string, now = Date.now()): Hit {
    if (now >= this.nextSweep || this.windows.size >= MAX_MEMORY_KEYS) this.sweep(now);
    let entry = this.windows.get(key);
    if (!entry || entry.resetAt <= now) {
      entry = { count: 0, resetAt: now + this.windowMs };
      this.windows.set(key, entry);
    }
    entry.count++;
    return entry;
  }

  /** Drops ended windows; a flood of distinct addresses can't grow the map without bound. */
  private sweep(now: number): void {
    this.nextSweep = now + this.windowMs;
    for (const [key, entry] of this.windows) if (entry.resetAt <= now) this.windows.delete(key);
    // Still full of live windows: forget the oldest (they are re-counted from zero: lenient, never wrong the other way for long).
    for (const key of this.windows.keys()) {
      if (this.windows.size < MAX_MEMORY_KEYS) break;
      this.windows.delete(key);
    }
  }
}

/** INCR and set the window's expiry in one atomic step; returns [count, milliseconds left]. */
const HIT_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if n == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`;

/** A key's count and the milliseconds left in its window, without counting; [0, -2] when it has none. */
const PEEK_SCRIPT = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
return {n, redis.call('PTTL', KEYS[1])}`;

/** How long Redis is left alone after a failure before it is tried again. */
const RETRY_REDIS_AFTER_MS = 1000;
/**
 * How long a request waits for Redis before it is counted in memory, not
 * counting time in which this process could not run (src/loop-clock.ts): a
 * process starved of CPU used to take Redis for unavailable and stop sharing
 * its counts, although every answer had arrived.
 */
const COMMAND_TIMEOUT_MS = 250;
/** ioredis's own timeout, a backstop that frees the commands of a Redis that accepts them and never answers. */
const COMMAND_ABANDONED_MS = 10_000;

type RedisWithHit = Redis & {
  rateLimitHit(key: string, windowMs: number): Promise<[number, number]>;
  rateLimitPeek(key: string): Promise<[number, number]>;
};

type StoreLog = { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };

/**
 * Windows shared by every instance through Redis. When Redis is unreachable
 * or slow the counting falls back to `fallback` (this process's memory), so
 * the service keeps answering, and each change of state is logged once.
 */
export class RedisStore {
  private downUntil = 0;
  private usingMemory = false;

  /**
   * ioredis is loaded here, on first use, not with the module: loading it
   * added about 16 MB to the resident set of a service that never uses Redis
   * (110 vs 94 MB idle).
   */
  static async open(url: string, prefix: string, windowMs: number, fallback: MemoryStore, log: StoreLog): Promise<RedisStore> {
    const { Redis } = await import('ioredis');
    const redis = new Redis(url, {
      // Fail at once while disconnected instead of queueing: a request must not wait for Redis.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_ABANDONED_MS,
      connectTimeout: 1000,
      retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    }) as RedisWithHit;
    return new RedisStore(redis, prefix, windowMs, fallback, log);
  }

  private constructor(
    private readonly redis: RedisWithHit,
    private readonly prefix: string,
    private readonly windowMs: number,
    private readonly fallback: MemoryStore,
    private readonly log: StoreLog,
  ) {
    this.redis.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
    this.redis.defineCommand('rateLimitPeek', { numberOfKeys: 1, lua: PEEK_SCRIPT });
    // ioredis emits 'error' on every failed attempt; an unlistened 'error' would crash the process.
    this.redis.on('error', (err: Error) => this.down(err));
    this.redis.on('ready', () => {
      if (this.usingMemory) this.log.info({ store: 'redis' }, 'rate limit store: Redis is back, limits are shared again');
      this.usingMemory = false;
      this.downUntil = 0;
    });
  }

  /** True when Redis should be asked; false means count in memory for now. */
  get available(): boolean {
    return this.redis.status === 'ready' && Date.now() >= this.downUntil;
  }

  /** The windows of one scope (`ip:`, `team:`): its keys carry the scope's prefix in Redis and in the fallback. */
  scoped(scope: string): WindowStore {
    return {
      hitNow: (key) => this.hitNow(scope + key), hit: (key) => this.hit(scope + key),
      peekNow: (key) => this.peekNow(scope + key), peek: (key) => this.peek(scope + key),
    };
  }

  private peekNow(key: string): Hit | null | undefined {
    return this.available ? undefined : this.fallback.peekNow(key);
  }

  private async peek(key: string): Promise<Hit | null> {
    if (!this.available) return this.fallback.peekNow(key);
    try {
      const [count, ttl] = await this.timed(this.redis.rateLimitPeek(this.prefix + key));
      return count > 0 && ttl > 0 ? { count, resetAt: Date.now() + ttl } : null;
    } catch (err) {
      this.down(err as Error);
      return this.fallback.peekNow(key);
    }
  }

  /** While Redis is unavailable, the count in this process's memory; otherwise undefined: ask hit(). */
  private hitNow(key: string): Hit | undefined {
    return this.available ? undefined : this.fallback.hitNow(key);
  }

  private async hit(key: string): Promise<Hit> {
    if (!this.available) return this.fallback.hitNow(key);
    try {
      const [count, ttl] = await this.timed(this.redis.rateLimitHit(this.prefix + key, this.windowMs));
      return { count, resetAt: Date.now() + ttl };
    } catch (err) {
      this.down(err as Error);
      return this.fallback.hitNow(key);
    }
  }

  /**
   * Waits (at most `timeoutMs`) for the first connection, so a new instance
   * starts with shared limits. An instance that starts without them says so,
   * as it does when Redis goes away later, and again once Redis is back.
   */
  async connected(timeoutMs: number): Promise<void> {
    if (this.redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const done = () => { clearTimeout(timer); this.redis.off('ready', done); resolve(); };
      const timer = setTimeout(done, timeoutMs);
      this.redis.once('ready', done);
    });
    // Read again: the wait above may have changed it (TypeScript keeps the narrowing of the first check).
    const status: string = this.redis.status;
    if (status !== 'ready') this.down(new Error(`not connected within ${timeoutMs} ms of starting`));
  }

  private timed<T>(command: Promise<T>): Promise<T> {
    return withinLoopTime(command, COMMAND_TIMEOUT_MS, () => new Error(`no answer from Redis within ${COMMAND_TIMEOUT_MS} ms`));
  }

  private down(err: Error): void {
    this.downUntil = Date.now() + RETRY_REDIS_AFTER_MS;
    if (this.usingMemory) return;
    this.usingMemory = true;
    this.log.warn({ store: 'memory', err: { message: err.message } }, 'rate limit store: Redis unavailable, counting in this process until it is back');
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

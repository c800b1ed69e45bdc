import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import type { Bindings, ChildLoggerOptions, LogFn } from 'pino';

/**
 * Fastify's per-request logger (`request.log`), created only when something
 * logs through it: Fastify makes a pino child per request otherwise (its
 * bindings serialized on every request), and only error paths use it; the
 * request line itself is written above.
 */
class LazyChildLogger {
  private real: FastifyBaseLogger | undefined;

  constructor(private readonly parent: FastifyBaseLogger, private readonly bindings: Bindings, private readonly options: ChildLoggerOptions) {}

  private get logger(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.real?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  fatal(...args: Parameters<LogFn>): void { this.logger.fatal(...args); }
  error(...args: Parameters<LogFn>): void { this.logger.error(...args); }
  warn(...args: Parameters<LogFn>): void { this.logger.warn(...args); }
  info(...args: Parameters<LogFn>): void { this.logger.info(...args); }
  debug(...args: Parameters<LogFn>): void { this.logger.debug(...args); }
  trace(...args: Parameters<LogFn>): void { this.logger.trace(...args); }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

export const lazyChildLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) =>
  new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger;

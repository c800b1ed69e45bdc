import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { refusal, renderError, type ApiError } from '../errors/catalogue.js';
import type { EdgeLineWriter } from './fast-path/request-log-line.js';
import type { AppMetrics } from './metrics.js';
import { EVERY_ANSWER_HEADERS } from './response-headers.js';

export interface EdgeDeps {
  /** Undefined when request logging is off. */
  writeLine: EdgeLineWriter | undefined;
  metrics: AppMetrics;
  /** Counts a request against its address's budget (src/http/rate-limit.ts). */
  countAddress(ip: string): void;
  log: FastifyBaseLogger;
}

/** Route label of answers given before routing (the metrics' `route`). */
const UNPARSED = 'unparsed';
const UNROUTED = 'unrouted';

/** The headers every answer carries (src/http/response-headers.ts adds them to the routes' answers). */
const headersOf = (id: string, error: ApiError) => ({
  'content-type': 'application/json; charset=utf-8',
  'x-request-id': id,
  ...EVERY_ANSWER_HEADERS,
  ...error.headers,
});

/**
 * The answers given where no route's hooks run: the HTTP parser's refusals
 * (malformed requests, headers too large or too slow, a failed
 * `Expect`), the router's (a malformed URL, a path parameter over its
 * length), and CONNECT. Each is the contract's `{"detail": ...}` with the
 * headers of every answer, one request line in the log, a count in the
 * metrics and, where the client's address is known, a request against its
 * budget, as a routed answer would be. Built before the Fastify instance
 * (whose options take these handlers) and attached once the app's parts exist.
 */
export class EdgeAnswers {
  private deps: EdgeDeps | undefined;

  attach(deps: EdgeDeps): void {
    this.deps = deps;
  }

  /** Fastify's `frameworkErrors`: the router could not route the request. No hook runs for it. */
  readonly frameworkError = (err: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void => {
    const error = refusal(err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 414 : 400);
    reply.code(error.statusCode).headers(headersOf(request.id, error)).send(renderError(error).body);
    this.record(request.id, request.ip, request.method, UNROUTED, error.statusCode, reply.elapsedTime);
  };

  /** Fastify's `clientErrorHandler`: the HTTP parser refused what arrived on `socket`; there is no request. */
  readonly clientError = (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
      this.deps?.log.info({ ip: socket.remoteAddress, err: { code: err.code } }, 'request aborted by the client');
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    this.writeRaw(socket, refusal(status), null);
  };

  /** The server's `checkExpectation`: an `Expect` header other than 100-continue. */
  readonly expectationFailed = (req: IncomingMessage, res: ServerResponse): void => {
    const id = randomUUID();
    const error = refusal(417);
    const { body } = renderError(error);
    res.writeHead(error.statusCode, { ...headersOf(id, error), 'content-length': body.length, connection: 'close' });
    res.end(body);
    this.record(id, req.socket.remoteAddress, req.method ?? null, UNROUTED, error.statusCode, 0);
  };

  /** The server's `connect`: CONNECT opens no route of this API. */
  readonly connect = (req: IncomingMessage, socket: Socket): void => {
    this.writeRaw(socket, refusal(405), req.method ?? null);
  };

  private writeRaw(socket: Socket, error: ApiError, method: string | null): void {
    const id = randomUUID();
    const { body } = renderError(error);
    const headers = Object.entries({ ...headersOf(id, error), 'content-length': body.length, connection: 'close' })
      .map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 ${error.statusCode} ${STATUS_CODES[error.statusCode]}\r\n${headers}\r\n`, 'latin1'), body]));
    this.record(id, socket.remoteAddress, method, UNPARSED, error.statusCode, 0);
  }

  private record(id: string, ip: string | undefined, method: string | null, route: string, status: number, durationMs: number): void {
    if (!this.deps) return;
    this.deps.writeLine?.(id, ip, method, status, durationMs);
    this.deps.metrics.recordRequest(method ?? 'unknown', route, status, durationMs / 1000);
    if (ip) this.deps.countAddress(ip);
  }
}

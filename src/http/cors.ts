import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { API_KEY_HEADER, UPSTREAM_API_KEY_HEADER } from '../auth/authenticate.js';

/**
 * CORS is off unless CORS_ORIGINS lists the browser origins allowed to call
 * the API: a key in a web page is the exception, not the default. Listed
 * origins get the answer headers a browser client needs; any other origin
 * gets no Access-Control-* header at all. Preflights are answered in the
 * onRequest hook, before authentication (browsers send them without the key).
 */
export async function registerCors(app: FastifyInstance, origins: string[]): Promise<void> {
  if (origins.length === 0) return;
  const allowed = new Set(origins);
  await app.register(cors, {
    // false, not a list: another origin then gets no Access-Control-* header at all (not even the exposed list).
    origin: (origin, cb) => cb(null, origin !== undefined && allowed.has(origin) ? origin : false),
    // A lax preflight check: its strict 400 would be plain text, not our error shape.
    strictPreflight: false,
    methods: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'],
    allowedHeaders: [API_KEY_HEADER, UPSTREAM_API_KEY_HEADER, 'content-type', 'x-request-id'],
    exposedHeaders: ['x-request-id', 'retry-after', 'ratelimit', 'ratelimit-policy'],
    maxAge: 600,
  });
}

import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { API_KEY_HEADER } from '../auth/authenticate.js';

/**
 * CORS is off unless CORS_ORIGINS lists the browser origins allowed to call
 * the API: a key in a web page is the exception, not the default. Listed
 * origins get the answer headers a browser client needs; any other origin
 * gets no Access-Control-* header at all. Preflights are answered in the
 * onRequest hook, before authentication (browsers send them without the key).
 */
export async function registerCors(app: FastifyInstance, origins: string[]): Promise<void> {
  if (origins.length === 0) return;
  await app.register(cors, {
    origin: origins,
    methods: ['GET', 'HEAD', 'POST'],
    allowedHeaders: [API_KEY_HEADER, 'content-type', 'x-request-id'],
    exposedHeaders: ['x-request-id', 'retry-after', 'ratelimit', 'ratelimit-policy'],
    maxAge: 600,
  });
}

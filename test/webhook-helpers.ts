/**
 * What the webhook delivery tests share: a PostgreSQL of their own (no other
 * test file's endpoints, and no other process's dispatcher, ever see their
 * messages), a receiver on the loopback that records every delivery, and
 * the verification the upstream's users do, with `svix` and
 * `standardwebhooks`.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';

export interface PrivateDatabase {
  url: string;
  stop(): Promise<void>;
}

/** An embedded PostgreSQL in a fresh directory, for this file only (migrated by whoever opens it first). */
export async function privateDatabase(name: string): Promise<PrivateDatabase> {
  // Under /tmp and world-traversable: PostgreSQL runs as the postgres user when we are root.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hds-${name}-`));
  fs.chmodSync(dir, 0o755);
  const pg: EmbeddedPostgres = await startEmbeddedPostgres(dir);
  return {
    url: pg.url,
    stop: async () => {
      await pg.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Delivery {
  /** The request's path (and query). */
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
  /** The status answered (undefined: no answer, the connection was dropped or left hanging). */
  status?: number;
}

/** What a receiver does with a delivery: a status, 'hang' (never answer), or 'drop' (close the connection). */
export type Answer = number | 'hang' | 'drop';

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Deliveries answered 2xx, by webhook-id. */
  delivered(): Map<string, Delivery>;
  /** Requests received and not answered yet. */
  open(): number;
  close(): Promise<void>;
}

/** An HTTP server on 127.0.0.1 that records every request and answers as `answer` says (204 by default). */
export async function receiver(answer: (delivery: Delivery) => Answer | Promise<Answer> = () => 204): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  let open = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => { body += d; });
    req.on('end', async () => {
      const delivery: Delivery = { path: req.url ?? '', headers: req.headers, body, at: Date.now() };
      deliveries.push(delivery);
      open++;
      const what = await answer(delivery);
      if (what === 'hang') return;
      open--;
      if (what === 'drop') return void req.socket.destroy();
      delivery.status = what;
      res.writeHead(what, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    delivered: () => new Map(deliveries.filter((d) => d.status !== undefined && d.status < 300).map((d) => [String(d.headers['webhook-id']), d])),
    open: () => open,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Verifies a delivery as the upstream's users do, with both libraries; the
 * parsed envelope. Throws when either refuses it.
 */
export function verified(secret: string, delivery: Delivery): Record<string, any> {
  const h = delivery.headers as Record<string, string>;
  const svix = new SvixWebhook(secret).verify(delivery.body, { 'svix-id': h['svix-id']!, 'svix-timestamp': h['svix-timestamp']!, 'svix-signature': h['svix-signature']! });
  const standard = new StandardWebhook(secret).verify(delivery.body, {
    'webhook-id': h['webhook-id']!, 'webhook-timestamp': h['webhook-timestamp']!, 'webhook-signature': h['webhook-signature']!,
  });
  if (JSON.stringify(svix) !== JSON.stringify(standard)) throw new Error('the two libraries read different payloads');
  return standard as Record<string, any>;
}

/** A deterministic pseudo-random sequence in [0, 1) (mulberry32): the same failures on every run of a seed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

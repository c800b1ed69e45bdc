/**
 * What the webhook delivery tests share: a PostgreSQL of their own (no other
 * test file's endpoints, and no other process's dispatcher, ever see their
 * messages), a receiver on the loopback that records every delivery, and
 * the verification the upstream's users do, with `svix` and
 * `standardwebhooks`.
 */
import dgram from 'node:dgram';
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

export interface NameServer {
  /** `127.0.0.1:port`, for dns.promises.setServers. */
  address: string;
  /** Queries for held names not answered yet. */
  held(): number;
  /** Answers every held query (no such name) and closes. */
  close(): Promise<void>;
}

/**
 * A DNS server on the loopback (UDP): a name in `answers` gets its IPv4
 * address (and no IPv6 one); any other name is held unanswered, as a hung
 * name server would, until close().
 */
export async function nameServer(answers: Record<string, string>): Promise<NameServer> {
  const socket = dgram.createSocket('udp4');
  const held: { query: Buffer; end: number; rinfo: dgram.RemoteInfo }[] = [];
  const reply = (query: Buffer, end: number, rcode: number, a?: string) => {
    // The header (id, QR RD RA and the rcode, one question, 0 or 1 answer) and the question as asked.
    const header = Buffer.from([query[0]!, query[1]!, 0x81, 0x80 | rcode, 0, 1, 0, a ? 1 : 0, 0, 0, 0, 0]);
    const answer = a ? Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...a.split('.').map(Number)]) : Buffer.alloc(0);
    return Buffer.concat([header, query.subarray(12, end), answer]);
  };
  socket.on('message', (query, rinfo) => {
    const labels: string[] = [];
    let at = 12;
    while (query[at]! > 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('latin1'));
      at += 1 + query[at]!;
    }
    const end = at + 5;
    const type = query.readUInt16BE(at + 1);
    const name = labels.join('.').toLowerCase();
    if (!(name in answers)) return void held.push({ query, end, rinfo });
    socket.send(reply(query, end, 0, type === 1 ? answers[name] : undefined), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  let closed = false;
  return {
    address: `127.0.0.1:${socket.address().port}`,
    held: () => held.length,
    close: async () => {
      if (closed) return;
      closed = true;
      // NXDOMAIN for every held query, so that no lookup is left in flight.
      await Promise.all(held.splice(0).map(({ query, end, rinfo }) =>
        new Promise<void>((resolve) => socket.send(reply(query, end, 3), rinfo.port, rinfo.address, () => resolve()))));
      socket.close();
    },
  };
}

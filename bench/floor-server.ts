/**
 * The floor: a bare Fastify server that answers with bytes captured from the
 * real service, from memory. No database, no logging, no validation, no
 * logic beyond one Map lookup by URL. Whatever the service does beyond this
 * is its own cost; every throughput is reported as a ratio to this one.
 *
 * Run as its own process: `node --import tsx bench/floor-server.ts RESPONSES.json`.
 * RESPONSES.json: { [scenarioId]: CapturedResponse[] }. The harness picks the
 * scenario with `PUT /__floor/<scenarioId>` before each run (the route is
 * outside every measured path).
 */
import fs from 'node:fs';
import Fastify from 'fastify';
import type { CapturedResponse } from './capture.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: floor-server.ts RESPONSES.json\n');
  process.exit(2);
}
const captured = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, CapturedResponse[]>;
const scenarios = new Map<string, { byUrl: Map<string, Answer>; fallback: Answer }>();
for (const [id, list] of Object.entries(captured)) {
  const byUrl = new Map<string, Answer>();
  for (const r of list) byUrl.set(r.url, { status: r.status, headers: r.headers, body: Buffer.from(r.body, 'base64') });
  const first = list[0];
  if (first) scenarios.set(id, { byUrl, fallback: byUrl.get(first.url)! });
}

let current = scenarios.values().next().value;
const app = Fastify({ logger: false });

app.put<{ Params: { id: string } }>('/__floor/:id', async (request, reply) => {
  const next = scenarios.get(request.params.id);
  if (!next) return reply.code(404).send('no such scenario');
  current = next;
  return reply.code(204).send();
});

app.all('/*', (request, reply) => {
  const answer = current!.byUrl.get(request.url) ?? current!.fallback;
  reply.code(answer.status).headers(answer.headers).send(answer.body);
});

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`listening ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => app.close().then(() => process.exit(0)));

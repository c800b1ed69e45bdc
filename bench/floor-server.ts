/**
 * The floor: a bare Fastify server that answers with bytes captured from the
 * real service, from memory. No database, no logging, no validation, no
 * logic beyond one Map lookup by method and URL. Whatever the service does
 * beyond this is its own cost; every throughput is reported as a ratio to
 * this one.
 *
 * Run as its own process: `node --import tsx bench/floor-server.ts`. Before
 * each scenario the harness hands it that scenario's answers with
 * `PUT /__floor/<scenarioId>` (body: CapturedResponse[] as JSON; the route is
 * outside every measured path), and from then on it replays those. It holds
 * one scenario at a time.
 */
import Fastify from 'fastify';
import type { CapturedResponse } from './capture.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

interface Answers {
  /** By `METHOD url`. */
  byRequest: Map<string, Answer>;
  /** The first answer of each method: a request outside the captured sample (a random id) gets the answer of its kind. */
  byMethod: Map<string, Answer>;
  fallback: Answer;
}

function answersOf(list: CapturedResponse[]): Answers | undefined {
  const byRequest = new Map<string, Answer>();
  const byMethod = new Map<string, Answer>();
  for (const r of list) {
    const answer = { status: r.status, headers: r.headers, body: Buffer.from(r.body, 'base64') };
    byRequest.set(`${r.method} ${r.url}`, answer);
    if (!byMethod.has(r.method)) byMethod.set(r.method, answer);
  }
  const first = list[0];
  return first && { byRequest, byMethod, fallback: byRequest.get(`${first.method} ${first.url}`)! };
}

let current: Answers | undefined;
const app = Fastify({ logger: false });

// A scenario's answers can be large (a sample of 500-user pages): no body limit worth the name here.
app.put<{ Params: { id: string }; Body: CapturedResponse[] }>('/__floor/:id', { bodyLimit: 2 ** 30 }, async (request, reply) => {
  const next = Array.isArray(request.body) ? answersOf(request.body) : undefined;
  if (!next) return reply.code(400).send(`no answers for scenario ${request.params.id}`);
  current = next;
  return reply.code(204).send();
});

app.all('/*', (request, reply) => {
  if (!current) return reply.code(503).send('no scenario loaded');
  const answer = current.byRequest.get(`${request.method} ${request.url}`) ?? current.byMethod.get(request.method) ?? current.fallback;
  reply.code(answer.status).headers(answer.headers);
  // As the service does, a caller's request id comes back (the delete-undo plan learns from it which user answered).
  const requestId = request.headers['x-request-id'];
  if (typeof requestId === 'string') reply.header('x-request-id', requestId);
  reply.send(answer.body);
});

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`listening ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => app.close().then(() => process.exit(0)));

/**
 * One load run, in its own process so that the load generator never shares
 * an event loop with a server it measures.
 *
 *   node --import tsx bench/load-child.ts SPEC.json   (prints one JSON LoadResult line)
 */
import fs from 'node:fs';
import autocannon from 'autocannon';
import { readIds } from './dataset.js';
import { Histogram, percentile } from './latency.js';
import type { LoadResult, LoadSpec, PathPlan } from './load-plan.js';

const pick = <T>(items: T[]): T => items[Math.floor(Math.random() * items.length)]!;

/** Creates counted over the whole process (warm-up and measured run): no client_user_id is sent twice. */
let created = 0;

/** What one connection's delete-undo pair is about (autocannon's per-connection context). */
interface Pair {
  id?: string;
  deleted?: boolean;
}

/**
 * The pair as autocannon cycles it on each connection: the delete picks an
 * id that no connection has in flight, the undo follows on the same
 * connection once the delete answered 200 (after another answer there is
 * nothing to undo: the undo's setupRequest returns nothing, and autocannon
 * starts the cycle again with a delete).
 */
function deleteUndo(plan: Extract<PathPlan, { kind: 'delete-undo' }>): autocannon.Request[] {
  const ids = readIds(plan.file);
  const busy = new Set<string>();
  const release = (pair: Pair) => busy.delete(pair.id!);
  return [
    {
      method: 'DELETE',
      setupRequest: (req, context) => {
        const pair = context as Pair;
        let id = pick(ids);
        while (busy.has(id)) id = pick(ids);
        busy.add(id);
        pair.id = id;
        pair.deleted = false;
        return { ...req, path: `/v2/user/${id}`, headers: { ...plan.headers, 'x-request-id': `del-${id}` } };
      },
      onResponse: (status, _body, context) => {
        const pair = context as Pair;
        pair.deleted = status === 200;
        if (!pair.deleted) release(pair);
      },
    },
    {
      method: 'POST',
      setupRequest: (req, context) => {
        const pair = context as Pair;
        if (!pair.deleted) return undefined as unknown as autocannon.Request;
        return { ...req, path: `/v2/user/undo_delete?user_id=${pair.id}`, headers: { ...plan.headers, 'x-request-id': `undo-${pair.id}` } };
      },
      onResponse: (_status, _body, context) => release(context as Pair),
    },
  ];
}

function requestsFor(plan: PathPlan, tag: string): autocannon.Request[] {
  switch (plan.kind) {
    case 'fixed':
      return plan.requests.map((r) => ({ method: (r.method ?? 'GET') as autocannon.Request['method'], path: r.path, headers: r.headers, body: r.body }));
    case 'random-line': {
      const lines = readIds(plan.file);
      const bodies = plan.bodies ?? [];
      let turn = 0;
      return [{
        method: (plan.method ?? 'GET') as autocannon.Request['method'],
        headers: plan.headers,
        setupRequest: (req) => ({ ...req, path: plan.prefix + pick(lines), ...(bodies.length > 0 && { body: bodies[turn++ % bodies.length] }) }),
      }];
    }
    case 'random-path': {
      const paths = plan.paths;
      return [{ method: 'GET', headers: plan.headers, setupRequest: (req) => ({ ...req, path: pick(paths) }) }];
    }
    case 'random-offset':
      return [{ method: 'GET', headers: plan.headers, setupRequest: (req) => ({ ...req, path: plan.prefix + Math.floor(Math.random() * (plan.maxOffset + 1)) }) }];
    case 'create':
      return [{
        method: 'POST', path: plan.path, headers: plan.headers,
        setupRequest: (req) => ({ ...req, body: JSON.stringify({ client_user_id: `${plan.clientUserIdPrefix}${tag}-${++created}` }) }),
      }];
    case 'delete-undo':
      return deleteUndo(plan);
  }
}

/** The first few distinct connection errors, so that a run full of them says why. */
const errorSamples = new Set<string>();

/** Response times of the measured run, counted as they arrive. */
const latency = new Histogram();

function fire(spec: LoadSpec, duration: number, measure: boolean): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const options = { url: spec.url, connections: spec.connections, duration, requests: requestsFor(spec.plan, spec.tag), timeout: 10 };
    const instance = autocannon(options, (err, result) => (err ? reject(err) : resolve(result)));
    instance.on('reqError', (err: Error) => {
      if (errorSamples.size < 5) errorSamples.add(`${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}`.trim());
    });
    if (measure) {
      instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => latency.add(ms));
    }
  });
}

const spec = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as LoadSpec;
if (spec.warmup > 0) await fire(spec, spec.warmup, false);
const r = await fire(spec, spec.duration, true);
const statuses: Record<string, number> = {};
for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statuses[code] = s.count ?? 0;
const buckets = latency.buckets();
const result: LoadResult = {
  requestsPerSec: r.requests.total / r.duration,
  requests: r.requests.total,
  p50Ms: percentile(buckets, 0.5),
  p99Ms: percentile(buckets, 0.99),
  maxMs: r.latency.max,
  latency: buckets,
  statuses,
  socketErrors: r.errors,
  durationS: r.duration,
  errorSamples: [...errorSamples],
};
process.stdout.write(JSON.stringify(result) + '\n');

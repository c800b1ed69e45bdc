/**
 * One load run, in its own process so that the load generator never shares
 * an event loop with a server it measures.
 *
 *   node --import tsx bench/load-child.ts SPEC.json   (prints one JSON LoadResult line)
 */
import fs from 'node:fs';
import autocannon from 'autocannon';
import { latencyBucket, percentile } from './latency.js';
import type { LoadResult, LoadSpec, PathPlan } from './load-plan.js';

function requestsFor(plan: PathPlan): autocannon.Request[] {
  switch (plan.kind) {
    case 'fixed':
      return plan.requests.map((r) => ({ method: 'GET', path: r.path, headers: r.headers }));
    case 'random-line': {
      const lines = fs.readFileSync(plan.file, 'utf8').split('\n').filter((l) => l !== '');
      if (lines.length === 0) throw new Error(`no lines in ${plan.file}`);
      return [{ method: 'GET', headers: plan.headers, setupRequest: (req) => ({ ...req, path: plan.prefix + lines[Math.floor(Math.random() * lines.length)] }) }];
    }
    case 'random-path': {
      const paths = plan.paths;
      return [{ method: 'GET', headers: plan.headers, setupRequest: (req) => ({ ...req, path: paths[Math.floor(Math.random() * paths.length)] }) }];
    }
    case 'random-offset':
      return [{ method: 'GET', headers: plan.headers, setupRequest: (req) => ({ ...req, path: plan.prefix + Math.floor(Math.random() * (plan.maxOffset + 1)) }) }];
  }
}

/** The first few distinct connection errors, so that a run full of them says why. */
const errorSamples = new Set<string>();

/** Response times by bucket (bench/load.ts: latencyBucket), counted as they arrive. */
const latency = new Map<number, number>();

function fire(spec: LoadSpec, duration: number, measure: boolean): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const options = { url: spec.url, connections: spec.connections, duration, requests: requestsFor(spec.plan), timeout: 10 };
    const instance = autocannon(options, (err, result) => (err ? reject(err) : resolve(result)));
    instance.on('reqError', (err: Error) => {
      if (errorSamples.size < 5) errorSamples.add(`${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}`.trim());
    });
    if (measure) {
      instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
        const bucket = latencyBucket(ms);
        latency.set(bucket, (latency.get(bucket) ?? 0) + 1);
      });
    }
  });
}

const spec = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as LoadSpec;
if (spec.warmup > 0) await fire(spec, spec.warmup, false);
const r = await fire(spec, spec.duration, true);
const statuses: Record<string, number> = {};
for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statuses[code] = s.count ?? 0;
const buckets = [...latency].sort((a, b) => a[0] - b[0]);
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

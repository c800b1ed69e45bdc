import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { mergeBuckets, percentile } from './latency.js';
import type { LoadResult, LoadSpec } from './load-plan.js';
import { runWrk } from './load-wrk.js';
import { runBenchChild } from './processes.js';

export type LoadGenerator = 'wrk' | 'autocannon';

let runs = 0;
/** This harness run's own mark: with the run's number, every load run's tag (LoadSpec.tag) is unique, also across harness runs. */
const RUN_MARK = randomBytes(4).toString('hex');

/** Runs one load with wrk, or with autocannon in a child process (bench/load-child.ts), and returns its summary. */
export async function runLoad(root: string, workDir: string, generator: LoadGenerator, load: Omit<LoadSpec, 'tag'>): Promise<LoadResult> {
  const loadAvg1AtStart = os.loadavg()[0];
  const run = ++runs;
  const spec: LoadSpec = { ...load, tag: `${RUN_MARK}r${run}` };
  if (generator === 'wrk') return { ...(await runWrk(workDir, spec, run)), loadAvg1AtStart };
  return { ...(await runBenchChild<LoadResult>('autocannon', root, workDir, 'load-child.ts', spec)), loadAvg1AtStart };
}

/**
 * One result from rounds of the same load: their requests over their time,
 * percentiles over every response of every round (the histograms merge).
 */
export function combineRounds(rounds: LoadResult[]): LoadResult {
  const sum = (f: (r: LoadResult) => number) => rounds.reduce((n, r) => n + f(r), 0);
  const statuses: Record<string, number> = {};
  for (const r of rounds) for (const [code, n] of Object.entries(r.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
  const latency = mergeBuckets(rounds.map((r) => r.latency));
  const errorSamples = [...new Set(rounds.flatMap((r) => r.errorSamples ?? []))].slice(0, 5);
  return {
    requestsPerSec: sum((r) => r.requests) / sum((r) => r.durationS),
    requests: sum((r) => r.requests),
    p50Ms: percentile(latency, 0.5),
    p99Ms: percentile(latency, 0.99),
    maxMs: Math.max(...rounds.map((r) => r.maxMs)),
    latency,
    statuses,
    socketErrors: sum((r) => r.socketErrors),
    durationS: sum((r) => r.durationS),
    ...(errorSamples.length > 0 && { errorSamples }),
    ...(rounds[0]?.loadAvg1AtStart !== undefined && { loadAvg1AtStart: rounds[0].loadAvg1AtStart }),
  };
}

/**
 * `body` run back to back on `connections` loops until `warmupMs` and then
 * `seconds` have passed: the duration in ms of each run that started after
 * the warm-up. What the webhook benches' anchors and enqueue measure with.
 */
export async function timedLoop(connections: number, warmupMs: number, seconds: number, body: () => Promise<unknown>): Promise<number[]> {
  const measureFrom = performance.now() + warmupMs;
  const until = measureFrom + seconds * 1000;
  const durations: number[] = [];
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < until) {
      const started = performance.now();
      await body();
      if (started >= measureFrom) durations.push(performance.now() - started);
    }
  }));
  return durations;
}

/** The `p` quantile of `values` (NaN for none). */
export function quantile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
}

/** Response-time histograms that merge: buckets 0.1 ms wide below 100 ms, 1 ms wide above. */

/** The upper bound (ms) of the bucket `ms` falls in. */
export function latencyBucket(ms: number): number {
  return ms < 100 ? Math.ceil(ms * 10) / 10 : Math.ceil(ms);
}

/** The `q` quantile (0..1) of sorted [bucket, count] pairs: the bound of the bucket that holds it. */
export function percentile(buckets: [number, number][], q: number): number {
  const total = buckets.reduce((n, [, c]) => n + c, 0);
  if (total === 0) return 0;
  let seen = 0;
  for (const [bound, count] of buckets) {
    seen += count;
    if (seen >= q * total) return bound;
  }
  return buckets[buckets.length - 1]![0];
}

export function mergeBuckets(all: [number, number][][]): [number, number][] {
  const merged = new Map<number, number>();
  for (const buckets of all) for (const [bound, count] of buckets) merged.set(bound, (merged.get(bound) ?? 0) + count);
  return [...merged].sort((a, b) => a[0] - b[0]);
}

/** Response times counted per bucket as they come, and the slowest. */
export class Histogram {
  private readonly counts = new Map<number, number>();
  maxMs = 0;

  add(ms: number): void {
    const bucket = latencyBucket(ms);
    this.counts.set(bucket, (this.counts.get(bucket) ?? 0) + 1);
    this.maxMs = Math.max(this.maxMs, ms);
  }

  /** Sorted [upper bound, count] pairs. */
  buckets(): [number, number][] {
    return [...this.counts].sort((a, b) => a[0] - b[0]);
  }
}

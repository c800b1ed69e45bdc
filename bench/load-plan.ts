/**
 * What one load run sends; written by the harness as JSON, read by the load
 * child (bench/load-child.ts). Kept as data so that the service and the floor
 * get exactly the same request stream and the same per-request work in the
 * load generator.
 */
export type PathPlan =
  /** These requests in turn (autocannon cycles through them). */
  | { kind: 'fixed'; requests: { path: string; headers: Record<string, string> }[] }
  /** A random line of `file` after `prefix` for every request. */
  | { kind: 'random-line'; prefix: string; file: string; headers: Record<string, string> }
  /** A random path of the list for every request. */
  | { kind: 'random-path'; paths: string[]; headers: Record<string, string> }
  /** `prefix` + a random offset in [0, maxOffset] for every request. */
  | { kind: 'random-offset'; prefix: string; maxOffset: number; headers: Record<string, string> };

export interface LoadSpec {
  url: string;
  connections: number;
  /** Seconds measured. */
  duration: number;
  /** Seconds of the same load before, not measured (JIT, caches, pools). */
  warmup: number;
  plan: PathPlan;
}

export interface LoadResult {
  requestsPerSec: number;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /**
   * Response times as [upper bound in ms, count] buckets (0.1 ms wide below
   * 100 ms, 1 ms above): results of several rounds merge into exact
   * percentiles (bench/load.ts).
   */
  latency: [number, number][];
  /** Count per HTTP status. */
  statuses: Record<string, number>;
  /** Connection errors and timeouts. */
  socketErrors: number;
  durationS: number;
  /** A few distinct connection error messages, when there were any. */
  errorSamples?: string[];
  /** The machine's 1-minute load average when the run started: other engineers' work shows here. */
  loadAvg1AtStart?: number;
}

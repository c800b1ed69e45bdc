/**
 * What one load run sends; written by the harness as JSON, read by the load
 * child (bench/load-child.ts) or written as a Lua script for wrk
 * (bench/load-wrk.ts). Kept as data so that the service and the floor get
 * exactly the same request stream and the same per-request work in the load
 * generator.
 */

/** One request as sent; GET without a body unless said otherwise. */
export interface PlannedRequest {
  method?: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export type PathPlan =
  /** These requests in turn (autocannon cycles through them). */
  | { kind: 'fixed'; requests: PlannedRequest[] }
  /**
   * A random line of `file` after `prefix` for every request; with `bodies`,
   * they are sent in turn, one per request (PATCH with a few values).
   */
  | { kind: 'random-line'; prefix: string; file: string; headers: Record<string, string>; method?: string; bodies?: string[] }
  /** A random path of the list for every request. */
  | { kind: 'random-path'; paths: string[]; headers: Record<string, string> }
  /** `prefix` + a random offset in [0, maxOffset] for every request. */
  | { kind: 'random-offset'; prefix: string; maxOffset: number; headers: Record<string, string> }
  /**
   * POST `path` with `{"client_user_id":"<clientUserIdPrefix><run tag>-<n>"}`,
   * n counting up from 1: every request creates another user, also across
   * runs (each run of the load generator has its own tag, LoadSpec.tag).
   */
  | { kind: 'create'; path: string; clientUserIdPrefix: string; headers: Record<string, string> }
  /**
   * `DELETE /v2/user/{id}` of a random line of `file`, then, once it answered
   * 200, `POST /v2/user/undo_delete?user_id={id}`: every answer counts. An id
   * whose delete or undo is in flight is never picked. Each request carries
   * `x-request-id: del-<id>` or `undo-<id>`, which the service (and the
   * floor) send back: wrk's response() learns from it which id answered.
   */
  | { kind: 'delete-undo'; file: string; headers: Record<string, string> };

export interface LoadSpec {
  url: string;
  connections: number;
  /** Seconds measured. */
  duration: number;
  /** Seconds of the same load before, not measured (JIT, caches, pools). */
  warmup: number;
  plan: PathPlan;
  /** Unique to this run of the load generator (the create plan's client_user_ids). */
  tag: string;
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

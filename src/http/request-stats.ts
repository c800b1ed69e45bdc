import type { Registry } from 'prom-client';

/** Upper bounds of the latency buckets, in seconds. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Series {
  labels: { method: string; route: string; status: string };
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  perBucket: number[];
}

/**
 * Requests answered and their latency, by method, route pattern and status:
 * `http_requests_total` and the histogram `http_request_duration_seconds`.
 * Counted in nested maps keyed by values the request already holds, and
 * rendered only when scraped: prom-client's own counter and histogram hash
 * and validate the label set on every call, which was a visible share of the
 * cheapest answers.
 */
export class RequestStats {
  private readonly series = new Map<string, Map<string, Map<number, Series>>>();

  record(method: string, route: string, status: number, seconds: number): void {
    let byRoute = this.series.get(method);
    if (!byRoute) this.series.set(method, (byRoute = new Map()));
    let byStatus = byRoute.get(route);
    if (!byStatus) byRoute.set(route, (byStatus = new Map()));
    let s = byStatus.get(status);
    if (!s) {
      s = { labels: { method, route, status: String(status) }, count: 0, sum: 0, perBucket: new Array<number>(BUCKETS.length + 1).fill(0) };
      byStatus.set(status, s);
    }
    s.count++;
    s.sum += seconds;
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    s.perBucket[i]!++;
  }

  private *all(): Generator<Series> {
    for (const byRoute of this.series.values()) for (const byStatus of byRoute.values()) yield* byStatus.values();
  }

  /** Adds both metrics to `registry`, in the shape prom-client's own would have. */
  register(registry: Registry): void {
    const counter = {
      name: 'http_requests_total', help: 'HTTP requests answered, by route pattern and status', type: 'counter', aggregator: 'sum',
      get: async () => ({ ...counterInfo, values: [...this.all()].map((s) => ({ labels: s.labels, value: s.count })) }),
      reset: () => this.series.clear(),
    };
    const counterInfo = { name: counter.name, help: counter.help, type: counter.type, aggregator: counter.aggregator };
    const histogram = {
      name: 'http_request_duration_seconds', help: 'Time to answer, by route pattern and status', type: 'histogram', aggregator: 'sum',
      get: async () => ({ ...histogramInfo, values: [...this.all()].flatMap((s) => histogramValues(histogram.name, s)) }),
      reset: () => this.series.clear(),
    };
    const histogramInfo = { name: histogram.name, help: histogram.help, type: histogram.type, aggregator: histogram.aggregator };
    registry.registerMetric(counter as unknown as Parameters<Registry['registerMetric']>[0]);
    registry.registerMetric(histogram as unknown as Parameters<Registry['registerMetric']>[0]);
  }
}

function histogramValues(name: string, s: Series) {
  let cumulative = 0;
  const buckets = BUCKETS.map((le, i) => {
    cumulative += s.perBucket[i]!;
    return { metricName: `${name}_bucket`, labels: { ...s.labels, le }, value: cumulative };
  });
  return [
    ...buckets,
    { metricName: `${name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count },
    { metricName: `${name}_sum`, labels: s.labels, value: s.sum },
    { metricName: `${name}_count`, labels: s.labels, value: s.count },
  ];
}

import type { Registry } from 'prom-client';

const HISTOGRAM = 'http_request_duration_seconds';
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
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: (s: Series) => object[]) => {
      const info = { name, help, type, aggregator: 'sum' };
      return { ...info, get: async () => ({ ...info, values: [...this.all()].flatMap(values) }), reset: () => this.series.clear() };
    };
    type Metric = Parameters<Registry['registerMetric']>[0];
    registry.registerMetric(metric('http_requests_total', 'HTTP requests answered, by route pattern and status', 'counter',
      (s) => [{ labels: s.labels, value: s.count }]) as unknown as Metric);
    registry.registerMetric(metric(HISTOGRAM, 'Time to answer, by route pattern and status', 'histogram',
      histogramValues) as unknown as Metric);
  }
}

function histogramValues(s: Series): object[] {
  let cumulative = 0;
  const buckets = BUCKETS.map((le, i) => {
    cumulative += s.perBucket[i]!;
    return { metricName: `${HISTOGRAM}_bucket`, labels: { ...s.labels, le }, value: cumulative };
  });
  return [
    ...buckets,
    { metricName: `${HISTOGRAM}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count },
    { metricName: `${HISTOGRAM}_sum`, labels: s.labels, value: s.sum },
    { metricName: `${HISTOGRAM}_count`, labels: s.labels, value: s.count },
  ];
}

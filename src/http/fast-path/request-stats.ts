const HISTOGRAM = 'http_request_duration_seconds';
/** Upper bounds of the latency buckets, in seconds. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Series {
  /** The series' labels as written in the exposition format: `method="GET",route="…",status="200"`. */
  labels: string;
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  perBucket: number[];
}

/** A label value in the Prometheus text format: backslash, newline and double quote escaped. */
const labelValue = (value: string) => value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/**
 * Requests answered and their latency, by method, route pattern and status:
 * `http_requests_total` and the histogram `http_request_duration_seconds`.
 * Counted in nested maps keyed by values the request already holds, and
 * rendered in the Prometheus text format only when scraped: prom-client's
 * own counter and histogram hash and validate the label set on every call,
 * which was a visible share of the cheapest answers.
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
      const labels = `method="${labelValue(method)}",route="${labelValue(route)}",status="${status}"`;
      s = { labels, count: 0, sum: 0, perBucket: new Array<number>(BUCKETS.length + 1).fill(0) };
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

  /** Both metrics in the Prometheus text exposition format (version 0.0.4), as prom-client's own would render them. */
  render(): string {
    const series = [...this.all()];
    const lines = [
      '# HELP http_requests_total HTTP requests answered, by route pattern and status',
      '# TYPE http_requests_total counter',
      ...series.map((s) => `http_requests_total{${s.labels}} ${s.count}`),
      `# HELP ${HISTOGRAM} Time to answer, by route pattern and status`,
      `# TYPE ${HISTOGRAM} histogram`,
    ];
    for (const s of series) {
      let cumulative = 0;
      BUCKETS.forEach((le, i) => {
        cumulative += s.perBucket[i]!;
        lines.push(`${HISTOGRAM}_bucket{${s.labels},le="${le}"} ${cumulative}`);
      });
      lines.push(`${HISTOGRAM}_bucket{${s.labels},le="+Inf"} ${s.count}`, `${HISTOGRAM}_sum{${s.labels}} ${s.sum}`, `${HISTOGRAM}_count{${s.labels}} ${s.count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

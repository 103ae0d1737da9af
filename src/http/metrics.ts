// Prometheus text exposition: request counts by family and status, latency histograms by family.
export type Family = 'classic' | 'gateway' | 'provisioning' | 'news' | 'ops' | 'stream';

const BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

class Histogram {
  readonly counts = new Array<number>(BUCKETS_S.length + 1).fill(0);
  sum = 0;
  count = 0;
  observe(seconds: number): void {
    let i = 0;
    while (i < BUCKETS_S.length && seconds > BUCKETS_S[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

export class Metrics {
  /** family -> status -> count (nested maps: no key string built per request) */
  private readonly requests = new Map<Family, Map<number, number>>();
  private readonly latency = new Map<Family, Histogram>();
  /** Values read at render time, by name: gauges go up and down, counters only up (`_total`). */
  private readonly readouts = new Map<string, { type: 'gauge' | 'counter'; read: () => number }>();
  private readonly labeled = new Map<string, { label: string; read: () => Record<string, number> }>();

  observe(family: Family, status: number, seconds: number): void {
    let byStatus = this.requests.get(family);
    if (!byStatus) this.requests.set(family, (byStatus = new Map()));
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    let h = this.latency.get(family);
    if (!h) this.latency.set(family, (h = new Histogram()));
    h.observe(seconds);
  }

  gauge(name: string, read: () => number): void {
    if (name.endsWith('_total')) throw new Error(`gauge ${name} must not end in _total (a counter's suffix)`);
    this.readouts.set(name, { type: 'gauge', read });
  }

  /** A gauge with one series per value of `label` (every key `read` returns, zeros included). */
  labeledGauge(name: string, label: string, read: () => Record<string, number>): void {
    this.labeled.set(name, { label, read });
  }

  /** A monotonic count kept elsewhere; its name ends in `_total` (Prometheus convention). */
  counter(name: string, read: () => number): void {
    if (!name.endsWith('_total')) throw new Error(`counter ${name} must end in _total`);
    this.readouts.set(name, { type: 'counter', read });
  }

  render(): string {
    const out: string[] = [];
    out.push('# HELP tagw_http_requests_total HTTP requests by route family and status.');
    out.push('# TYPE tagw_http_requests_total counter');
    for (const [family, byStatus] of this.requests) {
      for (const [status, v] of byStatus) out.push(`tagw_http_requests_total{family="${family}",status="${status}"} ${v}`);
    }
    out.push('# HELP tagw_http_request_duration_seconds HTTP request latency by route family.');
    out.push('# TYPE tagw_http_request_duration_seconds histogram');
    for (const [family, h] of this.latency) {
      let cum = 0;
      BUCKETS_S.forEach((b, i) => {
        cum += h.counts[i]!;
        out.push(`tagw_http_request_duration_seconds_bucket{family="${family}",le="${b}"} ${cum}`);
      });
      cum += h.counts[BUCKETS_S.length]!;
      out.push(`tagw_http_request_duration_seconds_bucket{family="${family}",le="+Inf"} ${cum}`);
      out.push(`tagw_http_request_duration_seconds_sum{family="${family}"} ${h.sum}`);
      out.push(`tagw_http_request_duration_seconds_count{family="${family}"} ${h.count}`);
    }
    for (const [name, { type, read }] of this.readouts) {
      out.push(`# TYPE ${name} ${type}`);
      out.push(`${name} ${read()}`);
    }
    for (const [name, { label, read }] of this.labeled) {
      out.push(`# TYPE ${name} gauge`);
      for (const [value, n] of Object.entries(read())) out.push(`${name}{${label}="${value}"} ${n}`);
    }
    return out.join('\n') + '\n';
  }
}

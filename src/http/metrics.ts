// /metrics through prom-client: every family with HELP and TYPE, Node's default process metrics
// (memory, main-thread event-loop lag, GC), and the gateway's own. Values kept elsewhere are read
// at scrape time (collect), so nothing on the request path touches prom-client except the
// per-request counters and histograms, whose label children are cached (no label hashing per request).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type Family = 'classic' | 'gateway' | 'provisioning' | 'news' | 'ops' | 'stream';

const BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Fewer buckets per route: one series set per route template. */
const ROUTE_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];

/** HELP of the families registered by name elsewhere (gauge/counter/labeledGauge without a help). */
const HELP: Record<string, string> = {
  tagw_http_inflight_requests: 'HTTP requests being handled now.',
  tagw_shard_restarts_total: 'Shard worker threads restarted after dying.',
  tagw_storage_available: '1 while DATA_DIR has the configured free space, else 0 (trading answers 503).',
  tagw_storage_free_bytes: 'Free bytes on the DATA_DIR file system (-1: unknown).',
  tagw_storage_full_episodes_total: 'Times DATA_DIR ran short of space.',
  tagw_broker_connections: 'Bound accounts by broker connection phase.',
  tagw_stream_sockets: 'Open /v1/stream sockets.',
  tagw_stream_coalescing_sockets: '/v1/stream sockets over their soft backpressure limit (quotes coalesced).',
  tagw_stream_accounts: 'Accounts with at least one /v1/stream socket.',
  tagw_stream_sync_upgrades_total: '/v1/stream upgrades answered without waiting for a shard.',
  tagw_stream_ticks_in_total: 'Ticks received from the shards.',
  tagw_stream_ticks_duplicate_total: 'Ticks dropped as duplicates (same symbol, time and prices).',
  tagw_stream_quotes_published_total: 'QUOTE frames published (once per tick and topic, whatever the subscribers).',
  tagw_stream_candles_published_total: 'CANDLE frames published.',
  tagw_stream_coalesced_flushes_total: 'Quotes held back for a slow socket and sent later, latest only (coalesced).',
  tagw_stream_backpressure_closes_total: 'Slow consumers closed at the hard backpressure limit.',
};
const helpOf = (name: string) => HELP[name] ?? name.replace(/^tagw_/, '').replace(/_/g, ' ') + '.';

type Child<T> = T extends Histogram<string> ? ReturnType<T['labels']> : T extends Counter<string> ? ReturnType<T['labels']> : never;

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({ name: 'tagw_http_requests_total', help: 'HTTP requests by route family and status.', labelNames: ['family', 'status'] as const, registers: [this.registry] });
  private readonly latency = new Histogram({ name: 'tagw_http_request_duration_seconds', help: 'HTTP request latency by route family.', labelNames: ['family'] as const, buckets: BUCKETS_S, registers: [this.registry] });
  private readonly routeLatency = new Histogram({ name: 'tagw_http_route_duration_seconds', help: 'HTTP request latency by route template (method and path pattern, never a raw URL).', labelNames: ['route'] as const, buckets: ROUTE_BUCKETS_S, registers: [this.registry] });
  private readonly classes = new Counter({ name: 'tagw_http_responses_total', help: 'HTTP responses by status class (2xx, 4xx, 5xx, ...).', labelNames: ['class'] as const, registers: [this.registry] });
  private readonly shardRoundTrip = new Histogram({ name: 'tagw_shard_round_trip_seconds', help: 'Main-to-shard command round trip (queueing included) by shard.', labelNames: ['shard'] as const, buckets: BUCKETS_S, registers: [this.registry] });
  private readonly requestChildren = new Map<string, Map<number, Child<Counter<'family' | 'status'>>>>();
  private readonly latencyChildren = new Map<string, Child<Histogram<'family'>>>();
  private readonly routeChildren = new Map<string, Child<Histogram<'route'>>>();
  private readonly classChildren: Child<Counter<'class'>>[] = [];
  private readonly shardChildren: Child<Histogram<'shard'>>[] = [];

  constructor(opts: { processMetrics?: boolean } = {}) {
    // Memory, CPU, handles, main-thread event-loop lag and GC (nodejs_*, process_*).
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** One finished request. `route`: the route's template, e.g. `GET /v1/seats/:id` (never the raw URL). */
  observe(family: Family, status: number, seconds: number, route?: string): void {
    let byStatus = this.requestChildren.get(family);
    if (!byStatus) this.requestChildren.set(family, (byStatus = new Map()));
    let c = byStatus.get(status);
    if (!c) byStatus.set(status, (c = this.requests.labels(family, String(status))));
    c.inc();
    let h = this.latencyChildren.get(family);
    if (!h) this.latencyChildren.set(family, (h = this.latency.labels(family)));
    h.observe(seconds);
    const k = Math.min(9, Math.max(0, Math.floor(status / 100)));
    (this.classChildren[k] ??= this.classes.labels(`${k}xx`)).inc();
    if (route !== undefined) {
      let r = this.routeChildren.get(route);
      if (!r) this.routeChildren.set(route, (r = this.routeLatency.labels(route)));
      r.observe(seconds);
    }
  }

  /** A main-to-shard command answered after `seconds`. */
  shardCall(shard: number, seconds: number): void {
    (this.shardChildren[shard] ??= this.shardRoundTrip.labels(String(shard))).observe(seconds);
  }

  gauge(name: string, read: () => number, help = helpOf(name)): void {
    if (name.endsWith('_total')) throw new Error(`gauge ${name} must not end in _total (a counter's suffix)`);
    new Gauge({ name, help, registers: [this.registry], collect() { this.set(read()); } });
  }

  /** A gauge with one series per value of `label` (every key `read` returns, zeros included). */
  labeledGauge(name: string, label: string, read: () => Record<string, number>, help = helpOf(name)): void {
    new Gauge({
      name, help, labelNames: [label], registers: [this.registry],
      collect() {
        this.reset();
        for (const [value, n] of Object.entries(read())) this.set({ [label]: value }, n);
      },
    });
  }

  /** A monotonic count kept elsewhere; its name ends in `_total` (Prometheus convention). */
  counter(name: string, read: () => number, help = helpOf(name)): void {
    if (!name.endsWith('_total')) throw new Error(`counter ${name} must end in _total`);
    this.labeledCounter(name, [], () => [[[], read()]], help);
  }

  /** Monotonic counts kept elsewhere, one series per label values. */
  labeledCounter(name: string, labels: string[], read: () => Array<[string[], number]>, help = helpOf(name)): void {
    if (!name.endsWith('_total')) throw new Error(`counter ${name} must end in _total`);
    new Counter({
      name, help, labelNames: labels, registers: [this.registry],
      collect() {
        this.reset();
        for (const [values, n] of read()) {
          if (labels.length === 0) this.inc(Math.max(0, n));
          else this.inc(Object.fromEntries(labels.map((k, i) => [k, values[i]!])), Math.max(0, n));
        }
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}

// /metrics through prom-client: every family with HELP and TYPE, Node's default process metrics
// (memory, main-thread event-loop lag, GC), and the gateway's own. Values kept elsewhere are read
// at scrape time (collect); the request path's counters and histograms are plain numbers that
// prom-client's registry formats at scrape time (HotHistogram, HotCounter), so a request costs no
// label hashing.
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';

/** What prom-client's registry reads from a metric at scrape time (its `get()`). */
interface Scraped {
  name: string;
  help: string;
  type: 'histogram' | 'counter';
  aggregator: 'sum';
  values: Array<{ metricName?: string; labels: Record<string, string | number>; value: number }>;
}

export type Family = 'classic' | 'gateway' | 'provisioning' | 'news' | 'ops' | 'stream';

const BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Fewer buckets per route: one series set per route template. */
const ROUTE_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];

/** HELP of the families registered by name elsewhere (gauge/counter/labeledGauge without a help). */
const HELP: Record<string, string> = {
  tagw_http_inflight_requests: 'HTTP requests being handled now.',
  tagw_http_pipelining_requests_total: 'Requests received on the pipelining port (HTTP_PIPELINING_PORT), each relayed to the gateway in order.',
  tagw_http_pipelining_connections: 'Open connections on the pipelining port.',
  tagw_shard_restarts_total: 'Shard worker threads restarted after dying.',
  tagw_storage_available: '1 while DATA_DIR has the configured free space, else 0 (trading answers 503).',
  tagw_storage_free_bytes: 'Free bytes on the DATA_DIR file system (-1: unknown).',
  tagw_storage_full_episodes_total: 'Times DATA_DIR ran short of space.',
  tagw_storage_shards_waiting: "Shards whose background writes (the simulator's, a seat's, idempotency outcomes) wait in memory for room on DATA_DIR now.",
  tagw_storage_shard_waiting_episodes_total: "Times a shard's background writes began to wait for room on DATA_DIR.",
  tagw_broker_connections: 'Bound accounts by broker connection phase.',
  tagw_stream_sockets: 'Open /v1/stream sockets.',
  tagw_stream_coalescing_sockets: '/v1/stream sockets over their soft backpressure limit (quotes coalesced).',
  tagw_stream_accounts: 'Accounts with at least one /v1/stream socket.',
  tagw_stream_sync_upgrades_total: '/v1/stream upgrades answered without waiting for a shard.',
  tagw_ws_upgrades_unanchored_total: 'WebSocket upgrades completed from async code with no upgrade anchor open (src/http/corkAnchor.ts): 0 unless the anchor was lost (every such upgrade on the JS fallback, which has none).',
  tagw_stream_ticks_in_total: 'Ticks received from the shards.',
  tagw_stream_ticks_duplicate_total: 'Ticks dropped as duplicates (same symbol, time and prices).',
  tagw_stream_quotes_published_total: 'QUOTE frames published (once per tick and topic, whatever the subscribers).',
  tagw_stream_candles_published_total: 'CANDLE frames published.',
  tagw_stream_coalesced_flushes_total: 'Quotes held back for a slow socket and sent later, latest only (coalesced).',
  tagw_stream_backpressure_closes_total: 'Slow consumers closed at the hard backpressure limit.',
};
const helpOf = (name: string) => HELP[name] ?? name.replace(/^tagw_/, '').replace(/_/g, ' ') + '.';

/** One labelled series of a request-path histogram: plain numbers, updated without prom-client. */
interface HistogramSeries {
  readonly labels: Record<string, string>;
  readonly counts: number[];
  sum: number;
  count: number;
}

/**
 * A histogram on the request path. prom-client hashes the label set on every observe (even
 * through a `labels()` child); here a series is looked up once and then updated as plain numbers,
 * and prom-client's registry formats it at scrape time (registered as a metric object with `get`).
 */
class HotHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly all: HistogramSeries[] = [];

  constructor(registry: Registry, readonly name: string, readonly help: string, private readonly buckets: readonly number[]) {
    registry.registerMetric(this as unknown as Metric);
  }

  series(labels: Record<string, string>): HistogramSeries {
    const s: HistogramSeries = { labels, counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
    this.all.push(s);
    return s;
  }

  observe(s: HistogramSeries, value: number): void {
    const b = this.buckets;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    s.counts[i]!++;
    s.sum += value;
    s.count++;
  }

  get(): Promise<Scraped> {
    const values: Scraped['values'] = [];
    for (const s of this.all) {
      let cum = 0;
      this.buckets.forEach((le, i) => {
        cum += s.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le }, value: cum });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values });
  }
}

/** A counter on the request path, same idea: plain numbers, formatted at scrape time. */
class HotCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly all: Array<{ labels: Record<string, string>; value: number }> = [];

  constructor(registry: Registry, readonly name: string, readonly help: string) {
    registry.registerMetric(this as unknown as Metric);
  }

  series(labels: Record<string, string>): { value: number } {
    const s = { labels, value: 0 };
    this.all.push(s);
    return s;
  }

  get(): Promise<Scraped> {
    return Promise.resolve({ name: this.name, help: this.help, type: 'counter', aggregator: 'sum', values: this.all.map((s) => ({ labels: s.labels, value: s.value })) });
  }
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new HotCounter(this.registry, 'tagw_http_requests_total', 'HTTP requests by route family and status.');
  private readonly latency = new HotHistogram(this.registry, 'tagw_http_request_duration_seconds', 'HTTP request latency by route family.', BUCKETS_S);
  private readonly routeLatency = new HotHistogram(this.registry, 'tagw_http_route_duration_seconds', 'HTTP request latency by route template (method and path pattern, never a raw URL).', ROUTE_BUCKETS_S);
  private readonly classes = new HotCounter(this.registry, 'tagw_http_responses_total', 'HTTP responses by status class (2xx, 4xx, 5xx, ...).');
  private readonly shardRoundTrip = new HotHistogram(this.registry, 'tagw_shard_round_trip_seconds', 'Main-to-shard command round trip (queueing included) by shard.', BUCKETS_S);
  /** family -> status -> count (nested maps: no key string built per request) */
  private readonly requestSeries = new Map<string, Map<number, { value: number }>>();
  private readonly latencySeries = new Map<string, HistogramSeries>();
  private readonly routeSeries = new Map<string, HistogramSeries>();
  private readonly classSeries: Array<{ value: number }> = [];
  private readonly shardSeries: HistogramSeries[] = [];

  constructor(opts: { processMetrics?: boolean } = {}) {
    // Memory, CPU, handles, main-thread event-loop lag and GC (nodejs_*, process_*).
    // Its event-loop lag samples every second, not every 10 ms (100 wake-ups a second of an idle
    // gateway, issue 19): tagw_thread_event_loop_lag_* samples every 10 ms while a thread works.
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 1000 });
  }

  /** One finished request. `route`: the route's template, e.g. `GET /v1/seats/:id` (never the raw URL). */
  observe(family: Family, status: number, seconds: number, route?: string): void {
    let byStatus = this.requestSeries.get(family);
    if (!byStatus) this.requestSeries.set(family, (byStatus = new Map()));
    let c = byStatus.get(status);
    if (!c) byStatus.set(status, (c = this.requests.series({ family, status: String(status) })));
    c.value++;
    let h = this.latencySeries.get(family);
    if (!h) this.latencySeries.set(family, (h = this.latency.series({ family })));
    this.latency.observe(h, seconds);
    const k = Math.min(9, Math.max(0, Math.floor(status / 100)));
    (this.classSeries[k] ??= this.classes.series({ class: `${k}xx` })).value++;
    if (route !== undefined) {
      let r = this.routeSeries.get(route);
      if (!r) this.routeSeries.set(route, (r = this.routeLatency.series({ route })));
      this.routeLatency.observe(r, seconds);
    }
  }

  /** A main-to-shard command answered after `seconds`. */
  shardCall(shard: number, seconds: number): void {
    this.shardRoundTrip.observe((this.shardSeries[shard] ??= this.shardRoundTrip.series({ shard: String(shard) })), seconds);
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

  /** A gauge with one series per label values (those `read` returns). */
  gaugeSeries(name: string, labels: string[], read: () => Array<[string[], number]>, help = helpOf(name)): void {
    if (name.endsWith('_total')) throw new Error(`gauge ${name} must not end in _total (a counter's suffix)`);
    new Gauge({
      name, help, labelNames: labels, registers: [this.registry],
      collect() {
        this.reset();
        for (const [values, n] of read()) this.set(Object.fromEntries(labels.map((k, i) => [k, values[i]!])), n);
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

// /metrics through prom-client: parsed by a Prometheus text parser, every family has HELP and
// TYPE; route latency labelled by template (never ids), status classes, threads, shards, orders.
// And x-request-id on every response.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { openStream, type Refused } from '../helpers/stream-helpers.js';

let t: TestGateway;
let key: string;
let id: string;
beforeAll(async () => {
  t = await startTestGateway({ shards: 1 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'm' } })).body.key;
  id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'metrics', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
});
afterAll(() => t?.stop());

const order = (cid: string, volume = '0.01') => t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=${volume}&clientOrderId=${cid}`, { headers: { 'x-api-key': key } });
/** A histogram's series count by label set, read from the text (the parser keeps only a histogram's buckets). */
const counts = (text: string, name: string) => Object.fromEntries([...text.matchAll(new RegExp(`^${name}_count\\{([^}]*)\\} (\\S+)$`, 'gm'))].map((m) => [m[1]!, Number(m[2])]));

describe('/metrics', () => {
  it('parses as Prometheus text; every family has HELP and TYPE; labels carry route templates, not ids', async () => {
    expect((await order('m-1')).status).toBe(200);
    expect((await order('m-1')).headers.get('idempotent-replay')).toBe('true');
    expect((await order('m-1', '0.02')).status).toBe(422);
    expect((await order('m-2', '100000')).status).toBe(400); // the broker refuses: no margin for it
    const seat = id; // the account is a seat
    expect((await t.req('GET', `/v1/seats/${seat}`, { headers: mgmt(t.managementKey) })).status).toBe(200);
    await t.req('GET', `/no/such/${seat}`);

    const text = (await t.req('GET', '/metrics')).text;
    const families = parsePrometheusTextFormat(text);
    expect(text).not.toContain(seat);
    expect(families.length).toBeGreaterThan(20);
    for (const f of families) {
      expect(f.help, f.name).toMatch(/\S/);
      expect(['COUNTER', 'GAUGE', 'HISTOGRAM', 'SUMMARY'], f.name).toContain(f.type);
      for (const m of f.metrics) for (const v of Object.values(m.labels ?? {})) expect(v, f.name).not.toContain(seat);
    }
    const fam = (name: string) => {
      const f = families.find((x) => x.name === name);
      expect(f, name).toBeDefined();
      return f!;
    };
    const labelled = (name: string, labels: Record<string, string>) => fam(name).metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));

    expect(fam('tagw_http_route_duration_seconds').type).toBe('HISTOGRAM');
    const routes = counts(text, 'tagw_http_route_duration_seconds');
    expect(routes).toMatchObject({ 'route="GET /OrderSend"': 4, 'route="GET /v1/seats/:id"': 1, 'route="POST /ConnectEx"': 1, 'route="unmatched"': 1 });
    // Cumulative buckets ending at +Inf = the count.
    const buckets = [...text.matchAll(/^tagw_http_route_duration_seconds_bucket\{route="GET \/OrderSend",le="([^"]+)"\} (\d+)$/gm)].map((m) => Number(m[2]));
    expect(buckets.length).toBeGreaterThan(5);
    expect(buckets).toEqual([...buckets].sort((x, y) => x - y));
    expect(buckets.at(-1)).toBe(4);
    expect(Number(labelled('tagw_http_responses_total', { class: '2xx' })!.value)).toBeGreaterThan(0);
    expect(Number(labelled('tagw_http_responses_total', { class: '4xx' })!.value)).toBeGreaterThanOrEqual(3);
    // The names the dashboard and earlier tests read are still there.
    expect(labelled('tagw_http_requests_total', { family: 'classic', status: '200' })).toBeDefined();
    expect(fam('tagw_http_request_duration_seconds').type).toBe('HISTOGRAM');
    // Orders by outcome, counted where the answer is known.
    const orders = Object.fromEntries(fam('tagw_orders_total').metrics.filter((m) => m.labels!.op === 'OrderSend').map((m) => [m.labels!.outcome, Number(m.value)]));
    expect(orders).toEqual({ sent: 1, replayed: 1, conflicted: 1, rejected: 1 });
    // Process, threads and shards.
    for (const name of ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_gc_duration_seconds']) fam(name);
    expect(labelled('tagw_shard_queue_depth', { shard: '0' })).toBeDefined();
    expect(counts(text, 'tagw_shard_round_trip_seconds')['shard="0"']).toBeGreaterThan(0);
    const threads = fam('tagw_thread_event_loop_lag_p99_seconds').metrics.map((m) => m.labels!.thread).sort();
    expect(threads).toEqual(['main', 'shard-0']);
    for (const t of ['main', 'shard-0']) expect(Number(labelled('tagw_thread_heap_used_bytes', { thread: t })!.value)).toBeGreaterThan(1_000_000);
    expect(Number(labelled('tagw_thread_heap_total_bytes', { thread: 'shard-0' })!.value)).toBeGreaterThanOrEqual(Number(labelled('tagw_thread_heap_used_bytes', { thread: 'shard-0' })!.value));
    for (const name of ['tagw_thread_gc_pause_seconds_total', 'tagw_thread_gc_total', 'tagw_broker_reconnects_total', 'tagw_broker_connections', 'tagw_stream_sockets', 'tagw_stream_buffered_bytes', 'tagw_stream_coalesced_flushes_total', 'tagw_stream_backpressure_closes_total']) fam(name);
    expect(Number(labelled('tagw_broker_connections', { phase: 'connected' })!.value)).toBe(1);
  });
});

describe('x-request-id', () => {
  it('every response has one; a sane id from the client is echoed, anything else replaced', async () => {
    const a = await t.req('GET', '/healthz');
    const b = await t.req('GET', '/healthz');
    expect(a.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    expect(b.headers.get('x-request-id')).not.toBe(a.headers.get('x-request-id'));
    expect((await t.req('GET', '/healthz', { headers: { 'x-request-id': 'bot-7:trace-42' } })).headers.get('x-request-id')).toBe('bot-7:trace-42');
    expect((await t.req('GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } })).headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-/);
    // Errors and unmatched routes too.
    expect((await t.req('GET', '/v1/seats')).headers.get('x-request-id')).toBeTruthy();
    expect((await t.req('GET', '/nope')).headers.get('x-request-id')).toBeTruthy();
    // A request its route refuses before it runs (a path segment that is no percent-encoding) and
    // an OPTIONS: both went out without an id (docs/operations.md: every response has one) and the
    // refusal was missing from /metrics.
    const seen = async () => counts((await t.req('GET', '/metrics')).text, 'tagw_http_route_duration_seconds')['route="GET /v1/seats/:id"'] ?? 0;
    const before = await seen();
    const bad = await t.req('GET', '/v1/seats/%zz', { headers: { ...mgmt(t.managementKey), 'x-request-id': 'bot-7:bad-path' } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('x-request-id')).toBe('bot-7:bad-path');
    expect((await t.req('OPTIONS', '/healthz')).headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-/);
    expect(await seen()).toBe(before + 1);
    // WebSocket upgrades refused (no key, an unknown account): their JSON answers had none either.
    for (const q of [{ id }, { id: 'no-such-account', apiKey: key }] as Record<string, string>[]) {
      const r = await openStream(t.url, q, { 'x-request-id': 'bot-7:refused-upgrade' });
      expect('refused' in r && r.refused, JSON.stringify(q)).toBe(true);
      expect((r as Refused).headers['x-request-id'], JSON.stringify(q)).toBe('bot-7:refused-upgrade');
    }
  });
});

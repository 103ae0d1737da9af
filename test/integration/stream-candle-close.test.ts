// /v1/stream CANDLE frames through a bar's close, end to end (real gateway, embedded simulator,
// `ws` client). The shards' clock runs a few seconds before an M1 boundary (SHARD_CLOCK_OFFSET_MS),
// so the bar closes within seconds instead of up to a minute.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type Frame, type StreamClient, simServerOffsetMs } from '../helpers/stream-helpers.js';

/** The simulator's clock: this much ahead of the system clock, so it starts LEAD_MS before a minute.
 *  The test waits out LEAD_MS less its setup (gateway, bind, socket, first CANDLE: about 1 s on a
 *  quiet machine). Setup longer than LEAD_MS costs a minute (the next bar closes), not a failure. */
const LEAD_MS = 6_000;
const clockOffsetMs = ((60_000 - (Date.now() % 60_000) - LEAD_MS) % 60_000 + 60_000) % 60_000;

let t: TestGateway;
let p5: string;
let key: string;
const clients: StreamClient[] = [];

beforeAll(async () => {
  t = await startTestGateway({ shardClockOffsetMs: clockOffsetMs });
  const h = mgmt(t.managementKey);
  const a = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-p5', password: 'pw', server: 'Sim-P5-Demo' } });
  expect(a.status).toBe(200);
  p5 = a.body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'stream' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

describe('candles', () => {
  it('CANDLE frames: server-clock bar open, partial for the joined bar, closed exactly once, agreeing with price history', async () => {
    const c = await mustOpen(t.url, { id: p5, apiKey: key, heartbeat: '0' });
    clients.push(c);
    c.send({ action: 'subscribe', symbol: 'BTCUSD', timeframes: ['M1'] });
    const ack = await c.next('SUBSCRIBED');
    expect(ack.data.timeframes).toEqual(['M1']);
    const first = await c.next('CANDLE');
    expect(first.data).toMatchObject({ symbol: 'BTCUSD', timeframe: 'M1', closed: false, partial: true });
    expect(first.data.time - first.data.timeUtc).toBe(simServerOffsetMs(first.data.timeUtc * 1000) / 1000);
    expect(first.data.time % 60).toBe(0);
    expect(first.data.high).toBeGreaterThanOrEqual(Math.max(first.data.open, first.data.close));
    expect(first.data.low).toBeLessThanOrEqual(Math.min(first.data.open, first.data.close));
    // Wait for the bar to finish (seconds: see LEAD_MS) and the next one to start.
    const bar = first.data.time;
    const closedF = await c.until((x) => x.of('CANDLE').find((f) => f.data.time === bar && f.data.closed), 70_000, 'the bar closing');
    const next = await c.until((x) => x.of('CANDLE').find((f) => f.data.time > bar), 10_000, 'the next bar');
    expect(next.data.partial).toBe(false);
    expect(next.data.time).toBe(bar + 60);
    expect(c.of('CANDLE').filter((f) => f.data.time === bar && f.data.closed)).toHaveLength(1);
    expect(c.of('CANDLE').filter((f: Frame) => f.data.time === bar).every((f) => f.data.partial === true)).toBe(true);
    // The closed bar agrees with PriceHistoryV2 for the same bar (a gateway session on the same account).
    const conn = await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: p5 } });
    expect(conn.status, conn.text).toBe(200);
    const from = new Date(closedF.data.timeUtc * 1000).toISOString();
    const to = new Date(closedF.data.timeUtc * 1000 + 60_000).toISOString();
    const ph = await t.req('GET', `/v1/proxy/PriceHistoryV2?handle=${encodeURIComponent(conn.body.handle)}&symbol=BTCUSD&timeFrame=1&from=${from}&to=${to}`, { headers: { 'x-api-key': key } });
    expect(ph.status, ph.text).toBe(200);
    const bars = (Array.isArray(ph.body) ? ph.body : ph.body.candles ?? ph.body.bars ?? ph.body.result) as Array<Record<string, number>>;
    const h = bars.find((x) => x.timeSec === closedF.data.time);
    expect(h, ph.text.slice(0, 300)).toBeDefined();
    for (const f of ['open', 'high', 'low', 'close', 'ticks'] as const) expect(closedF.data[f], f).toBe(h![f]);
  }, 90_000);
});

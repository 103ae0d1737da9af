// Checks shared by the SIM_START tests (embedded simulator and bridge to `npm run sim -- --start`):
// what a gateway answers follows a simulated clock started at `startMs`, whose now is at most
// `atMost()` (the start plus the wall time since before the simulator started).
import { expect } from 'vitest';
import { mgmt, type TestGateway } from './gateway.js';
import { mustOpen } from './stream-helpers.js';

export interface MarketClockCase {
  t: TestGateway;
  key: string;
  id: string;
  startMs: number;
  atMost: () => number;
}

/** A full-access key labelled `label` and the account of broker login `<label>-1` on Sim-P5-Demo, made through /ConnectEx with it. */
export async function keyAndAccount(t: TestGateway, label: string): Promise<{ key: string; id: string }> {
  const key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label } })).body.key as string;
  const c = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `${label}-1`, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(c.status, c.text).toBe(200);
  return { key, id: c.body.id as string };
}

const within = (c: MarketClockCase, ms: number) => {
  expect(ms).toBeGreaterThanOrEqual(c.startMs);
  expect(ms).toBeLessThanOrEqual(c.atMost());
};

/** GetQuote's and ServerTimezoneInfo's times are on the simulated clock; returns them. */
export async function quoteAndServerTime(c: MarketClockCase, symbol: string): Promise<{ quote: number; server: number; dstInEffect: boolean }> {
  const h = { headers: { 'x-api-key': c.key } };
  const q = await c.t.req('GET', `/GetQuote?id=${c.id}&symbol=${symbol}`, h);
  expect(q.status, q.text).toBe(200);
  within(c, q.body.timeMsc);
  const tz = await c.t.req('GET', `/ServerTimezoneInfo?id=${c.id}`, h);
  within(c, Date.parse(tz.body.time));
  return { quote: q.body.timeMsc, server: Date.parse(tz.body.time), dstInEffect: tz.body.dstInEffect };
}

/** A market order, then /OrderHistory without a range: its deal is in (the market's last 30 days). */
export async function orderInDefaultHistory(c: MarketClockCase): Promise<void> {
  const h = { headers: { 'x-api-key': c.key } };
  const o = await c.t.req('GET', `/OrderSend?id=${c.id}&symbol=EURUSD&operation=Buy&volume=0.01`, h);
  expect(o.status, o.text).toBe(200);
  const hist = await c.t.req('GET', `/OrderHistory?id=${c.id}`, h);
  expect(hist.status, hist.text).toBe(200);
  expect((hist.body.deals as Array<{ entry: string }>).filter((d) => d.entry === 'in')).toHaveLength(1);
}

/** A gateway session that opens and closes a BTCUSD position finds it in ClosedOrders (orders since
 *  its connect, on the market clock); returns the session's handle (URL-encoded). */
export async function closedSinceConnect(c: MarketClockCase): Promise<string> {
  const h = { headers: { 'x-api-key': c.key } };
  const s = await c.t.req('POST', '/v1/connect', { ...h, body: { brokerAccountId: c.id } });
  expect(s.status, s.text).toBe(200);
  const handle = encodeURIComponent(s.body.handle);
  const buy = await c.t.req('GET', `/v1/proxy/OrderSendSafe?handle=${handle}&symbol=BTCUSD&operation=0&volume=0.01`, h);
  expect(buy.status, buy.text).toBe(200);
  const close = await c.t.req('GET', `/v1/proxy/OrderCloseSafe?handle=${handle}&ticket=${buy.body.positionId || buy.body.ticket}`, h);
  expect(close.status, close.text).toBe(200);
  const closed = await c.t.req('GET', `/v1/proxy/ClosedOrders?handle=${handle}`, h);
  expect(closed.status, closed.text).toBe(200);
  expect((closed.body as Array<{ symbol: string }>).some((x) => x.symbol === 'BTCUSD')).toBe(true);
  return handle;
}

/** /v1/stream: BTCUSD quotes and an M1 candle on the market clock, quote ages true. Returns the latest quote time. */
export async function streamOnMarketClock(c: MarketClockCase): Promise<number> {
  const s = await mustOpen(c.t.url, { id: c.id, apiKey: c.key, heartbeat: '0' });
  try {
    s.send({ action: 'subscribe', symbol: 'BTCUSD', timeframes: ['M1'] });
    await s.until((x) => x.of('QUOTE').length >= 3 && x.of('CANDLE').length >= 1, 10_000, 'quotes and a candle');
    let latest = 0;
    for (const f of s.of('QUOTE')) {
      within(c, f.data.timeMscUtc);
      expect(f.data.ageMs).toBeLessThan(10_000);
      latest = Math.max(latest, f.data.timeMscUtc);
    }
    const bar = s.of('CANDLE')[0]!.data.timeUtc * 1000;
    expect(bar).toBeGreaterThanOrEqual(c.startMs - 60_000);
    expect(bar).toBeLessThanOrEqual(c.atMost());
    return latest;
  } finally {
    await s.close();
  }
}
